// Python's str operations on UTF-8 text: code points (len, indexing and slicing count them,
// not bytes), Unicode case mapping and whitespace as str.strip/split/upper/title see them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern::jinja {

// The code point at s[i], advancing i; a byte that does not start valid UTF-8 is taken as
// one code point of its own value, so every byte string has a decoding.
char32_t decode_utf8(std::string_view s, size_t& i);
void append_utf8(char32_t cp, std::string& out);
std::vector<char32_t> to_code_points(std::string_view s);
std::string from_code_points(const std::vector<char32_t>& cps);
size_t code_point_count(std::string_view s);

bool py_isspace(char32_t cp);
bool py_isalnum(char32_t cp);
bool py_isalpha(char32_t cp);
bool py_isdigit(char32_t cp);
bool py_isprintable(char32_t cp);
bool py_islower_cased(char32_t cp);  // has an uppercase form: a lowercase letter
bool py_isupper_cased(char32_t cp);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()

// str.strip / lstrip / rstrip; `chars` null = whitespace.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split / rsplit; `sep` null = runs of whitespace; maxsplit < 0 = no limit.
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit,
                                  bool from_right);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends = false);
// str.replace; count < 0 = all.
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count);
// str.count / str.find (index in code points, -1 when absent).
int64_t py_count(std::string_view s, std::string_view sub);
int64_t py_find(std::string_view s, std::string_view sub, bool from_right);

}  // namespace tern::jinja
