// Binds the arguments of a filter, test, method or global call to its parameter names the way
// Python does (positional first, then keywords), failing on unknown or repeated ones.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "tern/jinja/fault.h"
#include "tern/jinja/value.h"

namespace tern::jinja {

class Params {
 public:
  Params(const std::string& what, const CallArgs& args, std::initializer_list<const char*> names)
      : what_(what), values_(names.size()) {
    if (args.positional.size() > names.size())
      fail(what + " takes at most " + std::to_string(names.size()) + " arguments, got " +
           std::to_string(args.positional.size()));
    for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = args.positional[i];
    for (const auto& [key, value] : args.keyword) {
      size_t i = 0;
      for (const char* name : names) {
        if (key == name) break;
        ++i;
      }
      if (i == names.size()) fail(what + " got an unexpected keyword argument '" + key + "'");
      if (values_[i]) fail(what + " got multiple values for argument '" + key + "'");
      values_[i] = value;
    }
  }

  bool has(size_t i) const { return values_[i].has_value() && !values_[i]->is_none(); }
  Value get(size_t i, Value fallback = Value::none()) const {
    return values_[i] ? *values_[i] : fallback;
  }
  Value required(size_t i, const char* name) const {
    if (!values_[i]) fail(what_ + " is missing the argument '" + name + "'");
    return *values_[i];
  }
  std::string str(size_t i, const char* name) const {
    const Value v = required(i, name);
    if (!v.is_string()) fail(what_ + ": '" + name + "' must be a string, not " + v.type_name());
    return v.as_string();
  }
  int64_t integer(size_t i, int64_t fallback) const {
    if (!values_[i] || values_[i]->is_none()) return fallback;
    if (!values_[i]->is_number() || values_[i]->is_float())
      fail(what_ + ": expected an integer argument, got " + values_[i]->type_name());
    return values_[i]->as_int();
  }
  bool flag(size_t i, bool fallback) const { return values_[i] ? values_[i]->truthy() : fallback; }

 private:
  std::string what_;
  std::vector<std::optional<Value>> values_;
};

}  // namespace tern::jinja
