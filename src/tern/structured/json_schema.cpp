// The schema compiler: one grammar rule per schema node (and per $ref target, so recursive
// schemas become recursive rules), built from a few shared rules (ws, string, number, value).
#include "tern/structured/json_schema.h"

#include <map>
#include <set>

#include "tern/core/error.h"
#include "tern/structured/regex.h"

namespace tern::structured {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 64;

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {"title",   "description", "default",  "examples",
                                          "$schema", "$id",         "$comment", "deprecated",
                                          "readOnly", "writeOnly",  "$defs",    "definitions"};
  return k;
}

Expr ch(char c) { return Expr::lit(std::string(1, c)); }
Expr range(uint32_t lo, uint32_t hi) { return Expr::chars({{lo, hi}}); }

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root) {
    ws_ = g_.rule("ws");
    // At most one space between tokens: a model cannot spend its tokens on whitespace (small
    // and random models otherwise do), and compact JSON is what clients parse anyway.
    g_.define(ws_, Expr::repeat(ch(' '), 0, 1));
  }

  Grammar run() {
    const int32_t root = g_.rule("root");
    // Nothing after the value: the sequence ends there (no trailing whitespace to wander in).
    g_.define(root, Expr::seq({Expr::ref(ws_), Expr::ref(node(root_, "", 0))}));
    g_.root = root;
    return std::move(g_);
  }

  Grammar any_object() {
    const int32_t root = g_.rule("root");
    g_.define(root, Expr::seq({Expr::ref(ws_), Expr::ref(object_any())}));
    g_.root = root;
    return std::move(g_);
  }

 private:
  [[noreturn]] static void fail(const std::string& what, const std::string& path) {
    throw Error(what + " at " + (path.empty() ? "/" : path));
  }

  int32_t define(const std::string& hint, Expr e) {
    const int32_t r = g_.fresh(hint);
    g_.define(r, std::move(e));
    return r;
  }

  int32_t string_char() {
    if (char_ >= 0) return char_;
    const Expr hex = Expr::chars({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
    // \uXXXX outside the surrogates: a lone surrogate is not valid JSON text to most parsers.
    const Expr u4 = Expr::alt({Expr::seq({Expr::chars({{'0', '9'}, {'a', 'c'}, {'A', 'C'}, {'e', 'f'}, {'E', 'F'}}), Expr::repeat(hex, 3, 3)}),
                               Expr::seq({Expr::chars({{'d', 'd'}, {'D', 'D'}}), range('0', '7'), Expr::repeat(hex, 2, 2)})});
    char_ = define("char", Expr::alt({Expr::chars({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true),
                                      Expr::seq({ch('\\'), Expr::alt({Expr::chars({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
                                                                      Expr::seq({ch('u'), u4})})})}));
    return char_;
  }

  int32_t string_rule(int32_t min, int32_t max) {
    return define("string", Expr::seq({ch('"'), Expr::repeat(Expr::ref(string_char()), min, max), ch('"')}));
  }

  Expr int_part() {
    return Expr::seq({Expr::repeat(ch('-'), 0, 1),
                      Expr::alt({ch('0'), Expr::seq({range('1', '9'), Expr::repeat(range('0', '9'), 0, 15)})})});
  }

  int32_t integer_rule() {
    if (integer_ < 0) integer_ = define("integer", int_part());
    return integer_;
  }

  int32_t number_rule() {
    if (number_ >= 0) return number_;
    number_ = define("number",
                     Expr::seq({int_part(),
                                Expr::repeat(Expr::seq({ch('.'), Expr::repeat(range('0', '9'), 1, 16)}), 0, 1),
                                Expr::repeat(Expr::seq({Expr::chars({{'e', 'e'}, {'E', 'E'}}),
                                                        Expr::repeat(Expr::chars({{'+', '+'}, {'-', '-'}}), 0, 1),
                                                        Expr::repeat(range('0', '9'), 1, 2)}),
                                             0, 1)}));
    return number_;
  }

  // Any JSON value, objects with any keys: json_object and schemas that leave a value open.
  int32_t value_any() {
    if (value_ >= 0) return value_;
    value_ = g_.fresh("value");
    const int32_t obj = object_any();
    const int32_t arr = g_.fresh("array");
    const int32_t str = string_rule(0, -1);
    g_.define(value_, Expr::alt({Expr::ref(obj), Expr::ref(arr), Expr::ref(str), Expr::ref(number_rule()),
                                 Expr::lit("true"), Expr::lit("false"), Expr::lit("null")}));
    const Expr item = Expr::seq({Expr::ref(value_), Expr::ref(ws_)});
    g_.define(arr, Expr::seq({ch('['), Expr::ref(ws_),
                              Expr::repeat(Expr::seq({item, Expr::repeat(Expr::seq({ch(','), Expr::ref(ws_), item}), 0, -1)}), 0, 1),
                              ch(']')}));
    return value_;
  }

  int32_t object_any() {
    if (object_ >= 0) return object_;
    object_ = g_.fresh("object");
    const int32_t key = string_rule(0, -1);
    const Expr member = Expr::seq({Expr::ref(key), Expr::ref(ws_), ch(':'), Expr::ref(ws_), Expr::ref(value_any()), Expr::ref(ws_)});
    g_.define(object_, Expr::seq({ch('{'), Expr::ref(ws_),
                                  Expr::repeat(Expr::seq({member, Expr::repeat(Expr::seq({ch(','), Expr::ref(ws_), member}), 0, -1)}), 0, 1),
                                  ch('}')}));
    return object_;
  }

  static int32_t count(const json& s, const char* key, const std::string& path, int32_t fallback) {
    const auto it = s.find(key);
    if (it == s.end()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 10000)
      fail(std::string("'") + key + "' must be an integer in [0, 10000]", path);
    return static_cast<int32_t>(it->get<int64_t>());
  }

  const json& resolve(const std::string& ref, const std::string& path) const {
    if (ref == "#") return root_;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (ref.compare(0, p.size(), p) != 0) continue;
      const std::string section = p.substr(2, p.size() - 3);
      const std::string name = ref.substr(p.size());
      const auto defs = root_.find(section);
      if (defs == root_.end() || !defs->is_object() || !defs->contains(name))
        fail("'$ref' " + ref + " names no definition", path);
      return (*defs)[name];
    }
    fail("'$ref' " + ref + " is not supported (only #, #/$defs/… and #/definitions/…)", path);
  }

  int32_t node(const json& s, const std::string& path, int depth) {
    if (depth > kMaxDepth) fail("JSON schema nested too deeply", path);
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("the schema 'false' matches nothing", path);
      return value_any();
    }
    if (!s.is_object()) fail("a JSON schema must be an object or a boolean", path);
    static const std::set<std::string> known = {
        "type", "properties", "required", "additionalProperties", "enum", "const", "items",
        "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength",
        "pattern", "format"};
    for (const auto& [k, v] : s.items())
      if (!known.count(k) && !annotations().count(k))
        fail("unsupported JSON schema keyword '" + k + "'", path);
    if (auto it = s.find("$ref"); it != s.end()) {
      if (!it->is_string()) fail("'$ref' must be a string", path);
      for (const auto& [k, v] : s.items())
        if (k != "$ref" && !annotations().count(k)) fail("'$ref' with sibling keyword '" + k + "'", path);
      const std::string ref = it->get<std::string>();
      if (auto r = refs_.find(ref); r != refs_.end()) return r->second;
      const int32_t rule = g_.fresh("ref");
      refs_[ref] = rule;
      const json& target = resolve(ref, path);
      g_.define(rule, Expr::ref(node(target, ref.substr(1), depth + 1)));
      return rule;
    }
    for (const char* any : {"anyOf", "oneOf", "allOf"}) {
      const auto it = s.find(any);
      if (it == s.end()) continue;
      if (!it->is_array() || it->empty()) fail(std::string("'") + any + "' must be a non-empty list", path);
      for (const auto& [k, v] : s.items())
        if (k != any && !annotations().count(k))
          fail(std::string("'") + any + "' with sibling keyword '" + k + "'", path);
      if (std::string(any) == "allOf" && it->size() != 1)
        fail("'allOf' of more than one schema is not supported", path);
      std::vector<Expr> alts;
      for (size_t i = 0; i < it->size(); ++i)
        alts.push_back(Expr::ref(node((*it)[i], path + "/" + any + "/" + std::to_string(i), depth + 1)));
      return define("anyof", Expr::alt(std::move(alts)));
    }
    if (auto it = s.find("const"); it != s.end()) return define("const", Expr::lit(it->dump()));
    if (auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) fail("'enum' must be a non-empty list", path);
      std::vector<Expr> alts;
      for (const json& v : *it) alts.push_back(Expr::lit(v.dump()));
      return define("enum", Expr::alt(std::move(alts)));
    }
    std::vector<std::string> types;
    if (auto it = s.find("type"); it != s.end()) {
      if (it->is_string()) {
        types.push_back(it->get<std::string>());
      } else if (it->is_array() && !it->empty()) {
        for (const json& t : *it) {
          if (!t.is_string()) fail("'type' must be a string or a list of strings", path);
          types.push_back(t.get<std::string>());
        }
      } else {
        fail("'type' must be a string or a list of strings", path);
      }
    } else {
      // No type: what the other keywords imply, else any value.
      if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) types.push_back("object");
      if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) types.push_back("array");
      if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) types.push_back("string");
      if (types.empty()) return value_any();
    }
    std::vector<Expr> alts;
    for (const std::string& t : types) alts.push_back(Expr::ref(typed(s, t, path, depth)));
    return define("typed", Expr::alt(std::move(alts)));
  }

  int32_t typed(const json& s, const std::string& t, const std::string& path, int depth) {
    if (t == "string") return string_node(s, path);
    if (t == "integer") return integer_rule();
    if (t == "number") return number_rule();
    if (t == "boolean") return define("boolean", Expr::alt({Expr::lit("true"), Expr::lit("false")}));
    if (t == "null") return define("null", Expr::lit("null"));
    if (t == "array") return array_node(s, path, depth);
    if (t == "object") return object_node(s, path, depth);
    fail("unknown JSON schema type '" + t + "'", path);
  }

  int32_t string_node(const json& s, const std::string& path) {
    const int32_t min = count(s, "minLength", path, 0);
    const int32_t max = count(s, "maxLength", path, -1);
    if (max >= 0 && max < min) fail("'maxLength' is below 'minLength'", path);
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (auto it = s.find("pattern"); it != s.end()) {
      if (!it->is_string()) fail("'pattern' must be a string", path);
      if (lengths || s.contains("format")) fail("'pattern' with 'minLength', 'maxLength' or 'format' is not supported", path);
      std::string p = it->get<std::string>();
      // JSON schema patterns search; the grammar matches whole strings.
      if (p.empty() || p[0] != '^') p = ".*(?:" + p + ")";
      else p = p.substr(1);
      if (p.empty() || p.back() != '$' || (p.size() >= 2 && p[p.size() - 2] == '\\')) p = "(?:" + p + ").*";
      else p.pop_back();
      Expr body;
      try {
        body = regex_to_expr(p, g_, RegexOptions{true});
      } catch (const Error& e) {
        fail(std::string("'pattern': ") + e.what(), path);
      }
      return define("pattern", Expr::seq({ch('"'), std::move(body), ch('"')}));
    }
    if (auto it = s.find("format"); it != s.end()) {
      if (!it->is_string()) fail("'format' must be a string", path);
      if (lengths) fail("'format' with 'minLength' or 'maxLength' is not supported", path);
      return format_node(it->get<std::string>(), path);
    }
    return string_rule(min, max);
  }

  int32_t format_node(const std::string& f, const std::string& path) {
    const Expr d = range('0', '9');
    auto digits = [&](int n) { return Expr::repeat(d, n, n); };
    const Expr date = Expr::seq({digits(4), ch('-'), Expr::alt({Expr::seq({ch('0'), range('1', '9')}), Expr::seq({ch('1'), range('0', '2')})}),
                                 ch('-'), Expr::alt({Expr::seq({ch('0'), range('1', '9')}), Expr::seq({range('1', '2'), d}), Expr::seq({ch('3'), range('0', '1')})})});
    const Expr time = Expr::seq({Expr::alt({Expr::seq({range('0', '1'), d}), Expr::seq({ch('2'), range('0', '3')})}), ch(':'),
                                 range('0', '5'), d, ch(':'), range('0', '5'), d,
                                 Expr::repeat(Expr::seq({ch('.'), Expr::repeat(d, 1, 9)}), 0, 1),
                                 Expr::alt({Expr::chars({{'Z', 'Z'}, {'z', 'z'}}),
                                            Expr::seq({Expr::chars({{'+', '+'}, {'-', '-'}}), Expr::alt({Expr::seq({range('0', '1'), d}), Expr::seq({ch('2'), range('0', '3')})}), ch(':'), range('0', '5'), d})})});
    Expr body;
    if (f == "date") {
      body = date;
    } else if (f == "time") {
      body = time;
    } else if (f == "date-time") {
      body = Expr::seq({date, Expr::chars({{'T', 'T'}, {'t', 't'}}), time});
    } else if (f == "uuid") {
      const Expr h = Expr::chars({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
      auto hx = [&](int n) { return Expr::repeat(h, n, n); };
      body = Expr::seq({hx(8), ch('-'), hx(4), ch('-'), hx(4), ch('-'), hx(4), ch('-'), hx(12)});
    } else if (f == "ipv4") {
      const Expr octet = Expr::alt({Expr::seq({ch('2'), ch('5'), range('0', '5')}), Expr::seq({ch('2'), range('0', '4'), d}),
                                    Expr::seq({ch('1'), d, d}), Expr::seq({range('1', '9'), d}), d});
      body = Expr::seq({octet, ch('.'), octet, ch('.'), octet, ch('.'), octet});
    } else {
      fail("unsupported JSON schema format '" + f + "'", path);
    }
    return define("format", Expr::seq({ch('"'), std::move(body), ch('"')}));
  }

  int32_t array_node(const json& s, const std::string& path, int depth) {
    const int32_t min = count(s, "minItems", path, 0);
    const int32_t max = count(s, "maxItems", path, -1);
    if (max >= 0 && max < min) fail("'maxItems' is below 'minItems'", path);
    if (max == 0) return define("array", Expr::seq({ch('['), Expr::ref(ws_), ch(']')}));
    int32_t item_rule = value_any();
    if (auto it = s.find("items"); it != s.end()) {
      if (it->is_array()) fail("'items' as a list (tuple validation) is not supported", path);
      item_rule = node(*it, path + "/items", depth + 1);
    }
    const Expr item = Expr::seq({Expr::ref(item_rule), Expr::ref(ws_)});
    const Expr more = Expr::seq({ch(','), Expr::ref(ws_), item});
    const Expr items = Expr::seq({item, Expr::repeat(more, std::max(min - 1, 0), max < 0 ? -1 : max - 1)});
    return define("array", Expr::seq({ch('['), Expr::ref(ws_), min > 0 ? items : Expr::repeat(items, 0, 1), ch(']')}));
  }

  int32_t object_node(const json& s, const std::string& path, int depth) {
    std::vector<std::pair<std::string, int32_t>> props;  // key, value rule
    std::set<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) fail("'required' must be a list of strings", path);
      for (const json& r : *it) {
        if (!r.is_string()) fail("'required' must be a list of strings", path);
        required.insert(r.get<std::string>());
      }
    }
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) fail("'properties' must be an object", path);
      for (const auto& [k, v] : it->items()) props.emplace_back(k, node(v, path + "/properties/" + k, depth + 1));
    }
    for (const std::string& r : required) {
      bool found = false;
      for (const auto& p : props) found = found || p.first == r;
      if (!found) fail("required property '" + r + "' is not in 'properties'", path);
    }
    // Extra keys: absent or false → none; true or a schema → any key with that value.
    int32_t extra = -1;
    if (auto it = s.find("additionalProperties"); it != s.end()) {
      if (it->is_boolean()) {
        if (it->get<bool>()) extra = value_any();
      } else {
        extra = node(*it, path + "/additionalProperties", depth + 1);
      }
    }

    // Keys come in sorted order: a parsed nlohmann::json has lost the schema's own order.
    auto member = [&](const std::string& key, int32_t value) {
      return Expr::seq({Expr::lit(json(key).dump()), Expr::ref(ws_), ch(':'), Expr::ref(ws_), Expr::ref(value), Expr::ref(ws_)});
    };
    const Expr comma = Expr::seq({ch(','), Expr::ref(ws_)});
    const size_t n = props.size();
    // after[i]: members i… when one came before (each written after a comma); first[i]: when
    // none did.
    std::vector<int32_t> after(n + 1), first(n + 1);
    for (size_t i = 0; i <= n; ++i) {
      after[i] = g_.fresh("members");
      first[i] = g_.fresh("members");
    }
    if (extra >= 0) {
      const int32_t key = string_rule(0, -1);
      const Expr kv = Expr::seq({Expr::ref(key), Expr::ref(ws_), ch(':'), Expr::ref(ws_), Expr::ref(extra), Expr::ref(ws_)});
      g_.define(after[n], Expr::repeat(Expr::seq({comma, kv}), 0, -1));
      g_.define(first[n], Expr::repeat(Expr::seq({kv, Expr::repeat(Expr::seq({comma, kv}), 0, -1)}), 0, 1));
    } else {
      g_.define(after[n], Expr::seq({}));
      g_.define(first[n], Expr::seq({}));
    }
    for (size_t i = n; i-- > 0;) {
      const Expr kv = member(props[i].first, props[i].second);
      const bool req = required.count(props[i].first) > 0;
      const Expr with_after = Expr::seq({comma, kv, Expr::ref(after[i + 1])});
      const Expr with_first = Expr::seq({kv, Expr::ref(after[i + 1])});
      g_.define(after[i], req ? with_after : Expr::alt({with_after, Expr::ref(after[i + 1])}));
      g_.define(first[i], req ? with_first : Expr::alt({with_first, Expr::ref(first[i + 1])}));
    }
    return define("object", Expr::seq({ch('{'), Expr::ref(ws_), Expr::ref(first[0]), ch('}')}));
  }

  const json& root_;
  Grammar g_;
  std::map<std::string, int32_t> refs_;
  int32_t ws_ = -1, char_ = -1, integer_ = -1, number_ = -1, value_ = -1, object_ = -1;
};

}  // namespace

Grammar compile_json_schema(const json& schema) { return SchemaCompiler(schema).run(); }

Grammar compile_json_schema_text(std::string_view text) {
  json schema;
  try {
    schema = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(std::string("the JSON schema is not valid JSON: ") + e.what());
  }
  return compile_json_schema(schema);
}

Grammar json_object_grammar() {
  static const json empty = json::object();
  return SchemaCompiler(empty).any_object();
}

}  // namespace tern::structured
