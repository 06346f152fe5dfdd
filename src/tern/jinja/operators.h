// Python's operators on template values: arithmetic, comparison, `in`, iteration and len().
#pragma once

#include <string>
#include <vector>

#include "tern/jinja/value.h"

namespace tern::jinja {

[[noreturn]] void fail_undefined(const Value& undefined);
// + - * / // % ** and ~ (string concatenation); `max_bytes` bounds strings and lists built.
Value binary_op(const std::string& op, const Value& a, const Value& b, size_t max_bytes);
Value negate(const Value& v);
// == != < <= > >= in notin
bool compare_op(const std::string& op, const Value& a, const Value& b);
// -1, 0, 1 as Python's < orders them; fails with Python's TypeError text when unorderable.
int order(const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// list(value): items of a list, keys of a dict, characters of a string; Undefined is empty.
std::vector<Value> iterate(const Value& v);
int64_t length(const Value& v);  // len(value)

}  // namespace tern::jinja
