// Regular expressions (a practical subset) to grammar expressions, for `guided_regex` and JSON
// schema `pattern`: literals, escapes (\d \w \s and their negations, \n \t \uXXXX, escaped
// metacharacters), [classes] with ranges and ^, `.`, `|`, `* + ? {m} {m,} {m,n}` (lazy forms
// match the same whole strings), groups ( ) and (?: ). The match is always of the whole text;
// ^ at the start and $ at the end are accepted. Backreferences, lookaround, \b and named
// groups are errors naming the construct.
#pragma once

#include <string_view>

#include "tern/structured/grammar.h"

namespace tern::structured {

struct RegexOptions {
  // Inside a JSON string: '"', '\' and control characters are left out of classes and `.`,
  // and a literal '"' or '\' is written escaped, so the bytes are valid JSON string content.
  bool json_string = false;
};

// Throws tern::Error("regex: …") naming the unsupported construct or the syntax error.
Expr regex_to_expr(std::string_view pattern, Grammar& grammar, const RegexOptions& options = {});

// A grammar whose root matches exactly the strings of `pattern`.
Grammar compile_regex(std::string_view pattern);

}  // namespace tern::structured
