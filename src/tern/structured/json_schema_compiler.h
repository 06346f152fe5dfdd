// The JSON-schema compiler's class, private to its two files: json_schema.cpp (shared rules,
// the dispatch on keywords, scalars) and json_schema_containers.cpp (arrays and objects).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tern/structured/grammar.h"

namespace tern::structured {

// One grammar rule per schema node (and per $ref target, so recursive schemas become recursive
// rules). Errors name the keyword and the schema path: "… at /properties/x".
class SchemaCompiler {
 public:
  using json = nlohmann::json;

  explicit SchemaCompiler(const json& root);
  Grammar run();
  Grammar any_object();

 private:
  static Expr ch(char c) { return Expr::lit(std::string(1, c)); }
  static Expr range(uint32_t lo, uint32_t hi) { return Expr::chars({{lo, hi}}); }
  [[noreturn]] static void fail(const std::string& what, const std::string& path);
  // An integer keyword in [0, 10000] (lengths and item counts), else `fallback`.
  static int32_t count(const json& s, const char* key, const std::string& path, int32_t fallback);

  int32_t define(const std::string& hint, Expr e);
  // Shared rules, made once when first needed.
  int32_t string_char();
  int32_t string_rule(int32_t min, int32_t max);
  Expr int_part();
  int32_t integer_rule();
  int32_t number_rule();
  int32_t value_any();
  int32_t object_any();

  const json& resolve(const std::string& ref, const std::string& path) const;
  int32_t node(const json& s, const std::string& path, int depth);
  int32_t typed(const json& s, const std::string& t, const std::string& path, int depth);
  int32_t string_node(const json& s, const std::string& path);
  int32_t array_node(const json& s, const std::string& path, int depth);
  std::vector<Expr> extra_members(const json& s,
                                  const std::vector<std::pair<std::string, int32_t>>& props,
                                  const std::string& path, int depth);
  int32_t object_node(const json& s, const std::string& path, int depth);

  const json& root_;
  Grammar g_;
  std::map<std::string, int32_t> refs_;
  int32_t ws_ = -1, char_ = -1, integer_ = -1, number_ = -1, value_ = -1, object_ = -1;
};

}  // namespace tern::structured
