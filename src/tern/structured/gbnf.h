// llama.cpp's grammar syntax (GBNF): `name ::= alternatives`, "literals", [character classes]
// (ranges, ^ negation), ( groups ), `.`, postfix * + ? {m} {m,} {m,n}, # comments. A rule may
// span lines; the next `name ::=` starts the next rule.
#pragma once

#include <string_view>

#include "tern/structured/grammar.h"

namespace tern::structured {

// Parses `text` into rules (the start rule is `root`). Throws tern::Error with the line and
// column of the first problem ("grammar: line 3, column 7: expected '::='").
Grammar parse_gbnf(std::string_view text);

// The code point at text[pos] (advancing pos), for parsers that read UTF-8 source text.
// Throws tern::Error at invalid UTF-8, naming `what`.
uint32_t decode_code_point(std::string_view text, size_t& pos, const char* what);
// The UTF-8 encoding of a code point.
std::string encode_code_point(uint32_t cp);

}  // namespace tern::structured
