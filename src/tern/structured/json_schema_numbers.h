// Numeric bounds of a JSON schema (minimum, maximum, exclusiveMinimum, exclusiveMaximum) as
// exact digit automata: grammar expressions of exactly the decimal strings inside the bounds.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tern/structured/grammar.h"

namespace tern::structured {

// Integers have at most this many digits, bounded or not.
constexpr int kIntegerDigits = 16;
// A bounded number is written without an exponent and with at most this many digits in all,
// so that a double parser reads every one on the same side of a bound as its decimal value
// (15 significant digits survive the round trip through a double; 16 may not: 2.9999999999999999
// parses as 3.0).
constexpr int kBoundedNumberDigits = 15;

// Whether `schema` has any of the four bound keywords.
bool has_numeric_bounds(const nlohmann::json& schema);

// The integers (integer = true) or numbers the schema's bounds admit: no leading zeros, '-' for
// negatives (never "-0"). Throws tern::Error naming the keyword and `path` when a bound is not
// a number, or when no value the grammar can write lies inside the bounds.
Expr bounded_number_expr(const nlohmann::json& schema, bool integer, const std::string& path);

// Whether the JSON number `value` satisfies the schema's bounds (for enum and const values).
bool within_numeric_bounds(const nlohmann::json& value, const nlohmann::json& schema,
                           const std::string& path);

}  // namespace tern::structured
