// The schema compiler: one grammar rule per schema node (and per $ref target, so recursive
// schemas become recursive rules), built from a few shared rules (ws, string, number, value).
#include "tern/structured/json_schema.h"

#include <map>
#include <set>

#include "tern/core/error.h"
#include "tern/structured/json_schema_compiler.h"
#include "tern/structured/json_schema_numbers.h"
#include "tern/structured/json_schema_strings.h"

namespace tern::structured {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 64;

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {"title",    "description", "default",  "examples",
                                          "$schema",  "$id",         "$comment", "deprecated",
                                          "readOnly", "writeOnly",   "$defs",    "definitions"};
  return k;
}

const std::set<std::string>& keywords() {
  static const std::set<std::string> k = {"type",        "properties",
                                          "required",    "additionalProperties",
                                          "enum",        "const",
                                          "items",       "patternProperties",
                                          "minItems",    "maxItems",
                                          "prefixItems", "additionalItems",
                                          "anyOf",       "oneOf",
                                          "allOf",       "$ref",
                                          "minLength",   "maxLength",
                                          "pattern",     "format",
                                          "minimum",     "exclusiveMinimum",
                                          "maximum",     "exclusiveMaximum"};
  return k;
}

}  // namespace

SchemaCompiler::SchemaCompiler(const json& root) : root_(root) {
  ws_ = g_.rule("ws");
  // At most one space between tokens: a model cannot spend its tokens on whitespace (small
  // and random models otherwise do), and compact JSON is what clients parse anyway.
  g_.define(ws_, Expr::repeat(ch(' '), 0, 1));
}

Grammar SchemaCompiler::run() {
  const int32_t root = g_.rule("root");
  // Nothing after the value: the sequence ends there (no trailing whitespace to wander in).
  g_.define(root, Expr::seq({Expr::ref(ws_), Expr::ref(node(root_, "", 0))}));
  g_.root = root;
  return std::move(g_);
}

Grammar SchemaCompiler::any_object() {
  const int32_t root = g_.rule("root");
  g_.define(root, Expr::seq({Expr::ref(ws_), Expr::ref(object_any())}));
  g_.root = root;
  return std::move(g_);
}

void SchemaCompiler::fail(const std::string& what, const std::string& path) {
  throw Error(what + " at " + (path.empty() ? "/" : path));
}

int32_t SchemaCompiler::define(const std::string& hint, Expr e) {
  const int32_t r = g_.fresh(hint);
  g_.define(r, std::move(e));
  return r;
}

int32_t SchemaCompiler::string_char() {
  if (char_ >= 0) return char_;
  const Expr hex = Expr::chars({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
  // \uXXXX outside the surrogates: a lone surrogate is not valid JSON text to most parsers.
  const Expr u4 = Expr::alt(
      {Expr::seq({Expr::chars({{'0', '9'}, {'a', 'c'}, {'A', 'C'}, {'e', 'f'}, {'E', 'F'}}),
                  Expr::repeat(hex, 3, 3)}),
       Expr::seq(
           {Expr::chars({{'d', 'd'}, {'D', 'D'}}), range('0', '7'), Expr::repeat(hex, 2, 2)})});
  char_ = define("char", Expr::alt({Expr::chars({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true),
                                    Expr::seq({ch('\\'), Expr::alt({Expr::chars({{'"', '"'},
                                                                                 {'\\', '\\'},
                                                                                 {'/', '/'},
                                                                                 {'b', 'b'},
                                                                                 {'f', 'f'},
                                                                                 {'n', 'n'},
                                                                                 {'r', 'r'},
                                                                                 {'t', 't'}}),
                                                                    Expr::seq({ch('u'), u4})})})}));
  return char_;
}

int32_t SchemaCompiler::string_rule(int32_t min, int32_t max) {
  return define("string",
                Expr::seq({ch('"'), Expr::repeat(Expr::ref(string_char()), min, max), ch('"')}));
}

Expr SchemaCompiler::int_part() {
  return Expr::seq(
      {Expr::repeat(ch('-'), 0, 1),
       Expr::alt({ch('0'), Expr::seq({range('1', '9'), Expr::repeat(range('0', '9'), 0, 15)})})});
}

int32_t SchemaCompiler::integer_rule() {
  if (integer_ < 0) integer_ = define("integer", int_part());
  return integer_;
}

int32_t SchemaCompiler::number_rule() {
  if (number_ >= 0) return number_;
  number_ = define(
      "number",
      Expr::seq({int_part(),
                 Expr::repeat(Expr::seq({ch('.'), Expr::repeat(range('0', '9'), 1, 16)}), 0, 1),
                 Expr::repeat(Expr::seq({Expr::chars({{'e', 'e'}, {'E', 'E'}}),
                                         Expr::repeat(Expr::chars({{'+', '+'}, {'-', '-'}}), 0, 1),
                                         Expr::repeat(range('0', '9'), 1, 2)}),
                              0, 1)}));
  return number_;
}

// Any JSON value, objects with any keys: json_object and schemas that leave a value open.
int32_t SchemaCompiler::value_any() {
  if (value_ >= 0) return value_;
  value_ = g_.fresh("value");
  const int32_t obj = object_any();
  const int32_t arr = g_.fresh("array");
  const int32_t str = string_rule(0, -1);
  g_.define(value_,
            Expr::alt({Expr::ref(obj), Expr::ref(arr), Expr::ref(str), Expr::ref(number_rule()),
                       Expr::lit("true"), Expr::lit("false"), Expr::lit("null")}));
  const Expr item = Expr::seq({Expr::ref(value_), Expr::ref(ws_)});
  g_.define(
      arr,
      Expr::seq(
          {ch('['), Expr::ref(ws_),
           Expr::repeat(
               Expr::seq({item, Expr::repeat(Expr::seq({ch(','), Expr::ref(ws_), item}), 0, -1)}),
               0, 1),
           ch(']')}));
  return value_;
}

int32_t SchemaCompiler::object_any() {
  if (object_ >= 0) return object_;
  object_ = g_.fresh("object");
  const int32_t key = string_rule(0, -1);
  const Expr member = Expr::seq({Expr::ref(key), Expr::ref(ws_), ch(':'), Expr::ref(ws_),
                                 Expr::ref(value_any()), Expr::ref(ws_)});
  g_.define(
      object_,
      Expr::seq({ch('{'), Expr::ref(ws_),
                 Expr::repeat(
                     Expr::seq({member,
                                Expr::repeat(Expr::seq({ch(','), Expr::ref(ws_), member}), 0, -1)}),
                     0, 1),
                 ch('}')}));
  return object_;
}

int32_t SchemaCompiler::count(const json& s, const char* key, const std::string& path,
                              int32_t fallback) {
  const auto it = s.find(key);
  if (it == s.end()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 10000)
    fail(std::string("'") + key + "' must be an integer in [0, 10000]", path);
  return static_cast<int32_t>(it->get<int64_t>());
}

const json& SchemaCompiler::resolve(const std::string& ref, const std::string& path) const {
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

int32_t SchemaCompiler::node(const json& s, const std::string& path, int depth) {
  if (depth > kMaxDepth) fail("JSON schema nested too deeply", path);
  if (s.is_boolean()) {
    if (!s.get<bool>()) fail("the schema 'false' matches nothing", path);
    return value_any();
  }
  if (!s.is_object()) fail("a JSON schema must be an object or a boolean", path);

  for (const auto& [k, v] : s.items())
    if (!keywords().count(k) && !annotations().count(k))
      fail("unsupported JSON schema keyword '" + k + "'", path);
  if (auto it = s.find("$ref"); it != s.end()) {
    if (!it->is_string()) fail("'$ref' must be a string", path);
    for (const auto& [k, v] : s.items())
      if (k != "$ref" && !annotations().count(k))
        fail("'$ref' with sibling keyword '" + k + "'", path);
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
    if (!it->is_array() || it->empty())
      fail(std::string("'") + any + "' must be a non-empty list", path);
    for (const auto& [k, v] : s.items())
      if (k != any && !annotations().count(k))
        fail(std::string("'") + any + "' with sibling keyword '" + k + "'", path);
    if (std::string(any) == "allOf" && it->size() != 1)
      fail("'allOf' of more than one schema is not supported", path);
    std::vector<Expr> alts;
    for (size_t i = 0; i < it->size(); ++i)
      alts.push_back(
          Expr::ref(node((*it)[i], path + "/" + any + "/" + std::to_string(i), depth + 1)));
    return define("anyof", Expr::alt(std::move(alts)));
  }
  // Bounds apply to the numbers among const and enum values.
  auto in_bounds = [&](const json& v) {
    return !v.is_number() || !has_numeric_bounds(s) || within_numeric_bounds(v, s, path);
  };
  if (auto it = s.find("const"); it != s.end()) {
    if (!in_bounds(*it)) fail("'const' " + it->dump() + " is outside the schema's bounds", path);
    return define("const", Expr::lit(it->dump()));
  }
  if (auto it = s.find("enum"); it != s.end()) {
    if (!it->is_array() || it->empty()) fail("'enum' must be a non-empty list", path);
    std::vector<Expr> alts;
    for (const json& v : *it)
      if (in_bounds(v)) alts.push_back(Expr::lit(v.dump()));
    if (alts.empty()) fail("no 'enum' value is within the schema's bounds", path);
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
    auto any_of = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys)
        if (s.contains(k)) return true;
      return false;
    };
    if (any_of({"properties", "additionalProperties", "patternProperties", "required"}))
      types.push_back("object");
    if (any_of({"items", "prefixItems", "additionalItems", "minItems", "maxItems"}))
      types.push_back("array");
    if (any_of({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
    if (has_numeric_bounds(s)) types.push_back("number");
    if (types.empty()) return value_any();
  }
  std::vector<Expr> alts;
  for (const std::string& t : types) alts.push_back(Expr::ref(typed(s, t, path, depth)));
  return define("typed", Expr::alt(std::move(alts)));
}

int32_t SchemaCompiler::typed(const json& s, const std::string& t, const std::string& path,
                              int depth) {
  if (t == "string") return string_node(s, path);
  if ((t == "integer" || t == "number") && has_numeric_bounds(s))
    return define("bounded", bounded_number_expr(s, t == "integer", path));
  if (t == "integer") return integer_rule();
  if (t == "number") return number_rule();
  if (t == "boolean") return define("boolean", Expr::alt({Expr::lit("true"), Expr::lit("false")}));
  if (t == "null") return define("null", Expr::lit("null"));
  if (t == "array") return array_node(s, path, depth);
  if (t == "object") return object_node(s, path, depth);
  fail("unknown JSON schema type '" + t + "'", path);
}

int32_t SchemaCompiler::string_node(const json& s, const std::string& path) {
  const int32_t min = count(s, "minLength", path, 0);
  const int32_t max = count(s, "maxLength", path, -1);
  if (max >= 0 && max < min) fail("'maxLength' is below 'minLength'", path);
  const bool lengths = s.contains("minLength") || s.contains("maxLength");
  if (auto it = s.find("pattern"); it != s.end()) {
    if (!it->is_string()) fail("'pattern' must be a string", path);
    if (lengths || s.contains("format"))
      fail("'pattern' with 'minLength', 'maxLength' or 'format' is not supported", path);
    Expr body;
    try {
      body = pattern_expr(it->get<std::string>(), g_);
    } catch (const Error& e) {
      fail(std::string("'pattern': ") + e.what(), path);
    }
    return define("pattern", Expr::seq({ch('"'), std::move(body), ch('"')}));
  }
  if (auto it = s.find("format"); it != s.end()) {
    if (!it->is_string()) fail("'format' must be a string", path);
    if (lengths) fail("'format' with 'minLength' or 'maxLength' is not supported", path);
    return define("format",
                  Expr::seq({ch('"'), format_expr(it->get<std::string>(), path), ch('"')}));
  }
  return string_rule(min, max);
}

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
