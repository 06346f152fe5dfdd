// JSON schema → grammar, for response_format json_schema, guided_json and llama.cpp's
// json_schema. The subset (anything else is a tern::Error naming the keyword, never loosened):
// type (one or a list), properties, required, additionalProperties (false, true or a schema;
// absent counts as false, as xgrammar's strict mode does), patternProperties (keys matching a
// pattern; refused beside additionalProperties, where a named property matches a pattern, or
// where two patterns with different schemas may match one key), enum, const, items, prefixItems
// and items as a list with additionalItems (the rest, absent: no more items, as for objects),
// minItems, maxItems, anyOf and oneOf (both as any-of: oneOf's exclusivity is not checked),
// allOf of one schema, $ref to #, #/$defs/… and #/definitions/…, minLength, maxLength, pattern
// (see regex.h), format date, time, date-time, uuid, email, ipv4 (json_schema_strings.h),
// minimum, maximum, exclusiveMinimum, exclusiveMaximum (exact digit automata, see
// json_schema_numbers.h), and annotations (title, description, default, examples, $schema, $id,
// $comment, deprecated, readOnly, writeOnly). Integers have at most 16 digits; numbers 16 + 16
// fraction and 2 exponent digits, bounded ones 15 digits and no exponent. Output is JSON with at
// most one space between tokens; object keys come in sorted order (nlohmann's objects sort
// them), properties before patterned keys.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "tern/structured/grammar.h"

namespace tern::structured {

// Throws tern::Error: "unsupported JSON schema keyword 'not' at /properties/x".
Grammar compile_json_schema(const nlohmann::json& schema);
Grammar compile_json_schema_text(std::string_view schema_text);

// Any JSON object (response_format json_object).
Grammar json_object_grammar();

}  // namespace tern::structured
