// String constraints of a JSON schema that are regular languages: `format`s, and `pattern`
// (also as the key patterns of `patternProperties`), with the checks patternProperties needs.
#pragma once

#include <string>

#include "tern/structured/automaton.h"
#include "tern/structured/grammar.h"

namespace tern::structured {

// The content (between the quotes) of a string of `format`: date, time, date-time (RFC 3339,
// days checked against their month and leap years), uuid, email (a dot-atom local part of at
// most 64 characters at a domain name or an [IPv4] literal), ipv4. Throws tern::Error naming an
// unsupported format and `path`.
Expr format_expr(const std::string& format, const std::string& path);

// The content of a string matching the JSON-schema `pattern` (a search: unanchored ends may
// be surrounded by anything). Throws tern::Error("regex: …").
Expr pattern_expr(const std::string& pattern, Grammar& grammar);

// The strings a JSON-schema `pattern` finds a match in, as an automaton (for the checks of
// patternProperties: a key's match, two patterns' overlap). Throws tern::Error("regex: …").
Automaton search_automaton(const std::string& pattern);

// Whether some string is accepted by both automata: true when one is, and when the check gives
// up (past a bound on the pairs of states it explores).
bool may_overlap(Automaton& a, Automaton& b);

}  // namespace tern::structured
