// The values a Jinja template computes with: Python's None, bool, int, float, str, list/tuple,
// dict (insertion ordered), plus Jinja's namespace, callables and Undefined. Printing and
// comparing follow Python, because the rendered prompt must match what transformers renders.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tern::jinja {

class Value;
class Renderer;

struct Array {
  std::vector<Value> items;
  bool is_tuple = false;  // only changes how it prints: (1, 2) instead of [1, 2]
};

// Keys are strings (JSON objects and the dict literals of chat templates); lookups are linear,
// which is faster than hashing for the few keys a message or tool has.
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  Value* find(const std::string& key);
  void set(const std::string& key, Value value);
};

struct CallArgs;
struct Callable {
  std::string name;  // for error messages and printing
  std::function<Value(CallArgs&, Renderer&)> call;
};

class Value {
 public:
  enum class Kind : uint8_t {
    Undefined,
    None,
    Bool,
    Int,
    Float,
    String,
    List,
    Dict,
    Namespace,
    Function
  };

  Value() = default;  // Undefined
  static Value undefined(std::string hint = {});
  static Value none();
  Value(bool b) : kind_(Kind::Bool), data_(b) {}
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v) : kind_(Kind::Int), data_(v) {}
  Value(double v) : kind_(Kind::Float), data_(v) {}
  Value(std::string s) : kind_(Kind::String), data_(std::move(s)) {}
  Value(const char* s) : Value(std::string(s)) {}
  static Value list(std::vector<Value> items, bool is_tuple = false);
  static Value dict(Object object = {});
  static Value make_namespace(Object object = {});
  static Value function(std::string name, std::function<Value(CallArgs&, Renderer&)> call);
  static Value from_json(const nlohmann::ordered_json& json);
  static Value from_json(const nlohmann::json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const {
    return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool;
  }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }
  bool is_function() const { return kind_ == Kind::Function; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;    // Int or Bool
  double as_double() const;  // Int, Bool or Float
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const std::string& undefined_hint() const { return std::get<std::string>(data_); }
  const Array& as_array() const { return *std::get<std::shared_ptr<Array>>(data_); }
  const Object& as_object() const { return *std::get<std::shared_ptr<Object>>(data_); }
  // Namespaces are the one mutable value (`{% set ns.x = ... %}`); copies share the object.
  Object& namespace_object() const { return *std::get<std::shared_ptr<Object>>(data_); }
  std::shared_ptr<Object> namespace_ptr() const { return std::get<std::shared_ptr<Object>>(data_); }
  const Callable& as_function() const { return *std::get<std::shared_ptr<Callable>>(data_); }

  // Python's bool(): empty strings, lists, dicts, 0, 0.0, None and Undefined are false.
  bool truthy() const;
  // Python's str(): what {{ value }} prints (Undefined prints nothing).
  std::string str() const;
  // Python's repr(): how values print inside a list or dict.
  std::string repr() const;
  // Python's type name, for error messages ("'int' object has no attribute 'x'").
  std::string type_name() const;

 private:
  Kind kind_ = Kind::Undefined;
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>, std::shared_ptr<Callable>>
      data_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Python's ==: 1 == 1.0 == True, lists and dicts compare element-wise; Undefined equals only
// Undefined.
bool values_equal(const Value& a, const Value& b);

// Python's repr of a float (shortest round-trip digits, "1.0", "1e+16", "inf").
std::string python_float_repr(double v);

struct JsonOptions {
  int indent = -1;             // -1: one line; otherwise newline + indent spaces per level
  std::string item_separator;  // empty: Python's default (", " one-line, "," indented)
  std::string key_separator = ": ";
  bool ensure_ascii = false;
  bool sort_keys = false;
};
// Python's json.dumps, which is what transformers' tojson filter calls. Throws tern::Error
// (via `what`) for values JSON cannot hold (Undefined, functions).
std::string to_json(const Value& value, const JsonOptions& options);

}  // namespace tern::jinja
