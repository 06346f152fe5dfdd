// The tests' own JSON-schema validator, for the subset the compiler supports: outputs are
// checked against the schema itself, not against the grammar they came from. Written from the
// specification's words (std::regex, calendar arithmetic), sharing no code with the compiler.
#pragma once

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

namespace tern::testing {

inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Exact for every JSON integer (a long double holds 64 bits of mantissa) and every double.
inline long double numeric_value(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return static_cast<long double>(v.get<uint64_t>());
  if (v.is_number_integer()) return static_cast<long double>(v.get<int64_t>());
  return static_cast<long double>(v.get<double>());
}

inline bool valid_date(const std::string& s) {
  static const std::regex re(R"((\d{4})-(\d{2})-(\d{2}))");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  const int y = std::stoi(m[1]), month = std::stoi(m[2]), day = std::stoi(m[3]);
  if (month < 1 || month > 12 || day < 1) return false;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
  return day <= kDays[month - 1] + (month == 2 && leap ? 1 : 0);
}

// RFC 3339 full-time; a leap second (60) is let through, as the specification does.
inline bool valid_time(const std::string& s) {
  static const std::regex re(R"((\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2})))");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  if (std::stoi(m[1]) > 23 || std::stoi(m[2]) > 59 || std::stoi(m[3]) > 60) return false;
  return !m[6].matched || (std::stoi(m[6]) <= 23 && std::stoi(m[7]) <= 59);
}

inline bool valid_ipv4(const std::string& s) {
  static const std::regex re(R"((\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3}))");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  for (int i = 1; i <= 4; ++i) {
    const std::string octet = m[i];
    if (std::stoi(octet) > 255 || (octet.size() > 1 && octet[0] == '0')) return false;
  }
  return true;
}

// RFC 5321 Mailbox with a dot-atom local part: a domain name or an address literal.
inline bool valid_email(const std::string& s) {
  const size_t at = s.rfind('@');
  if (at == std::string::npos) return false;
  const std::string local = s.substr(0, at), domain = s.substr(at + 1);
  static const std::regex atom(
      R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*)");
  static const std::regex host(
      R"(([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)");
  if (local.size() > 64 || !std::regex_match(local, atom)) return false;
  if (domain.size() > 2 && domain.front() == '[' && domain.back() == ']')
    return valid_ipv4(domain.substr(1, domain.size() - 2));
  return domain.size() <= 253 && std::regex_match(domain, host);
}

inline bool valid_format(const std::string& format, const std::string& s) {
  if (format == "date") return valid_date(s);
  if (format == "time") return valid_time(s);
  if (format == "date-time")
    return s.size() > 11 && (s[10] == 'T' || s[10] == 't') && valid_date(s.substr(0, 10)) &&
           valid_time(s.substr(11));
  if (format == "uuid")
    return std::regex_match(s, std::regex("[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"));
  if (format == "email") return valid_email(s);
  if (format == "ipv4") return valid_ipv4(s);
  return true;  // formats are annotations unless a validator knows them
}

// Empty when `v` satisfies `s`; else what fails, with its path.
inline std::string schema_violation(const nlohmann::json& v, const nlohmann::json& s,
                                    const nlohmann::json& root, const std::string& path = "") {
  using nlohmann::json;
  if (s.is_boolean()) return s.get<bool>() ? "" : path + ": false schema";
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    if (ref == "#") return schema_violation(v, root, root, path);
    const std::string section = ref.rfind("#/$defs/", 0) == 0 ? "$defs" : "definitions";
    const std::string name = ref.substr(ref.find('/', 2) + 1);
    return schema_violation(v, root[section][name], root, path);
  }
  for (const char* any : {"anyOf", "oneOf", "allOf"})
    if (s.contains(any)) {
      for (const json& alt : s[any])
        if (schema_violation(v, alt, root, path).empty()) return "";
      return path + ": matches no " + any + " branch";
    }
  if (s.contains("const") && v != s["const"]) return path + ": not the const";
  if (s.contains("enum")) {
    bool found = false;
    for (const json& e : s["enum"]) found = found || e == v;
    if (!found) return path + ": not in the enum";
  }
  if (s.contains("type")) {
    std::vector<std::string> types;
    if (s["type"].is_string())
      types.push_back(s["type"]);
    else
      for (const json& t : s["type"]) types.push_back(t);
    bool ok = false;
    for (const std::string& t : types)
      ok = ok || (t == "string" && v.is_string()) || (t == "integer" && v.is_number_integer()) ||
           (t == "number" && v.is_number()) || (t == "boolean" && v.is_boolean()) ||
           (t == "null" && v.is_null()) || (t == "array" && v.is_array()) ||
           (t == "object" && v.is_object());
    if (!ok) return path + ": wrong type " + v.type_name();
  }
  if (v.is_number()) {
    const long double x = numeric_value(v);
    // Draft 4 wrote exclusiveMinimum: true beside minimum; later drafts give it a number.
    const bool strict_min = s.value("exclusiveMinimum", json(false)) == json(true);
    const bool strict_max = s.value("exclusiveMaximum", json(false)) == json(true);
    if (s.contains("minimum") &&
        (strict_min ? x <= numeric_value(s["minimum"]) : x < numeric_value(s["minimum"])))
      return path + ": below the minimum";
    if (s.contains("maximum") &&
        (strict_max ? x >= numeric_value(s["maximum"]) : x > numeric_value(s["maximum"])))
      return path + ": above the maximum";
    if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() &&
        x <= numeric_value(s["exclusiveMinimum"]))
      return path + ": not above the exclusive minimum";
    if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() &&
        x >= numeric_value(s["exclusiveMaximum"]))
      return path + ": not below the exclusive maximum";
  }
  if (v.is_string()) {
    const std::string str = v.get<std::string>();
    if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>())
      return path + ": too short";
    if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>())
      return path + ": too long";
    if (s.contains("pattern") &&
        !std::regex_search(str, std::regex(s["pattern"].get<std::string>())))
      return path + ": does not match the pattern";
    if (s.contains("format") && !valid_format(s["format"], str))
      return path + ": not a " + s["format"].get<std::string>();
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>())
      return path + ": too few items";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>())
      return path + ": too many items";
    // Positional schemas (prefixItems, or items as a list), then one for the rest.
    json positional = json::array(), rest = true;
    if (s.contains("prefixItems")) {
      positional = s["prefixItems"];
      rest = s.value("items", json(true));
    } else if (s.contains("items") && s["items"].is_array()) {
      positional = s["items"];
      rest = s.value("additionalItems", json(true));
    } else {
      rest = s.value("items", json(true));
    }
    for (size_t i = 0; i < v.size(); ++i) {
      const json& item = i < positional.size() ? positional[i] : rest;
      if (auto e = schema_violation(v[i], item, root, path + "/" + std::to_string(i)); !e.empty())
        return e;
    }
  }
  if (v.is_object()) {
    const json props = s.value("properties", json::object());
    const json patterns = s.value("patternProperties", json::object());
    for (const json& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return path + ": misses " + r.get<std::string>();
    for (const auto& [k, x] : v.items()) {
      bool known = props.contains(k);
      if (known)
        if (auto e = schema_violation(x, props[k], root, path + "/" + k); !e.empty()) return e;
      for (const auto& [p, ps] : patterns.items()) {
        if (!std::regex_search(k, std::regex(p))) continue;
        known = true;
        if (auto e = schema_violation(x, ps, root, path + "/" + k); !e.empty()) return e;
      }
      if (known) continue;
      if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
        if (auto e = schema_violation(x, s["additionalProperties"], root, path + "/" + k);
            !e.empty())
          return e;
      } else if (s.value("additionalProperties", json(false)) == json(false) &&
                 (s.contains("properties") || s.contains("patternProperties"))) {
        return path + ": extra property " + k;
      }
    }
  }
  return "";
}

}  // namespace tern::testing
