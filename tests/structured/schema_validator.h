// The tests' own JSON-schema validator, for the subset the compiler supports: outputs are
// checked against the schema itself, not against the grammar they came from.
#pragma once

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

namespace tern::testing {

inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
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
    if (s["type"].is_string()) types.push_back(s["type"]);
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
  if (v.is_string()) {
    const std::string str = v.get<std::string>();
    if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>()) return path + ": too short";
    if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>()) return path + ": too long";
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>())))
      return path + ": does not match the pattern";
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return path + ": too few items";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return path + ": too many items";
    if (s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i)
        if (auto e = schema_violation(v[i], s["items"], root, path + "/" + std::to_string(i)); !e.empty()) return e;
  }
  if (v.is_object()) {
    const json props = s.value("properties", json::object());
    for (const json& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return path + ": misses " + r.get<std::string>();
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (auto e = schema_violation(x, props[k], root, path + "/" + k); !e.empty()) return e;
      } else if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
        if (auto e = schema_violation(x, s["additionalProperties"], root, path + "/" + k); !e.empty()) return e;
      } else if (s.value("additionalProperties", json(false)) == json(false) && s.contains("properties")) {
        return path + ": extra property " + k;
      }
    }
  }
  return "";
}

}  // namespace tern::testing
