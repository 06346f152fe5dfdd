// Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF), shared by the file
// parsers, which reject invalid names, and the tokenizers and the incremental detokenizer,
// which must tell a truncated character from an invalid one.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tern {

enum class Utf8Status {
  Complete,    // a whole, valid character of `length` bytes
  Incomplete,  // the `length` bytes up to the end are a valid start of a longer character
  Invalid,     // `length` bytes (the maximal ill-formed subpart, at least 1) are not UTF-8
};

struct Utf8Char {
  Utf8Status status;
  size_t length;
};

// Scans the character starting at s[pos] (pos < s.size()). Overlong forms, surrogates and
// code points above U+10FFFF are invalid.
Utf8Char next_utf8_char(std::string_view s, size_t pos);

bool is_valid_utf8(std::string_view s);
// The byte offset of the first ill-formed or truncated character, nullopt when all is valid.
std::optional<size_t> first_invalid_utf8(std::string_view s);

// Replaces each ill-formed subpart (and a truncated character at the end) with U+FFFD.
std::string sanitize_utf8(std::string_view s);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace tern
