// Jinja's filters, tests and global functions, and the methods of str, list and dict that
// chat templates call, with the arguments and defaults of jinja2 3.1 / Python 3.
#pragma once

#include <optional>
#include <string>

#include "tern/jinja/value.h"

namespace tern::jinja {

Value apply_filter(Renderer& r, const std::string& name, const Value& input, CallArgs& args);
bool apply_test(Renderer& r, const std::string& name, const Value& input, CallArgs& args);
// A bound method of a str, list or dict, or nullopt when the type has no method of that name.
std::optional<Value> find_method(const Value& object, const std::string& name);
// range, namespace, dict, raise_exception and transformers' strftime_now.
const Object& builtin_globals();

}  // namespace tern::jinja
