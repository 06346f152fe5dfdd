// Python semantics of the Jinja values: truthiness, str/repr, equality and json.dumps.
#include "tern/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "tern/jinja/fault.h"
#include "tern/jinja/text.h"

namespace tern::jinja {

const Value* Object::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

Value* Object::find(const std::string& key) {
  for (auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Object::set(const std::string& key, Value value) {
  if (Value* slot = find(key))
    *slot = std::move(value);
  else
    items.emplace_back(key, std::move(value));
}

Value Value::undefined(std::string hint) {
  Value v;
  v.data_ = std::move(hint);
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::list(std::vector<Value> items, bool is_tuple) {
  Value v;
  v.kind_ = Kind::List;
  v.data_ = std::make_shared<Array>(Array{std::move(items), is_tuple});
  return v;
}

Value Value::dict(Object object) {
  Value v;
  v.kind_ = Kind::Dict;
  v.data_ = std::make_shared<Object>(std::move(object));
  return v;
}

Value Value::make_namespace(Object object) {
  Value v = dict(std::move(object));
  v.kind_ = Kind::Namespace;
  return v;
}

Value Value::function(std::string name, std::function<Value(CallArgs&, Renderer&)> call) {
  Value v;
  v.kind_ = Kind::Function;
  v.data_ = std::make_shared<Callable>(Callable{std::move(name), std::move(call)});
  return v;
}

template <typename Json>
static Value value_from_json(const Json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(json.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(json.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = json.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(json.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(json.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(value_from_json(item));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Object object;
      for (auto it = json.begin(); it != json.end(); ++it)
        object.items.emplace_back(it.key(), value_from_json(it.value()));
      return Value::dict(std::move(object));
    }
    default:
      fail("JSON value of type " + std::string(json.type_name()) + " has no template value");
  }
}

Value Value::from_json(const nlohmann::ordered_json& json) { return value_from_json(json); }
Value Value::from_json(const nlohmann::json& json) { return value_from_json(json); }

int64_t Value::as_int() const {
  if (kind_ == Kind::Bool) return as_bool() ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::as_double() const {
  if (kind_ == Kind::Float) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return as_bool();
    case Kind::Int:
      return as_int() != 0;
    case Kind::Float:
      return as_double() != 0.0;
    case Kind::String:
      return !as_string().empty();
    case Kind::List:
      return !as_array().items.empty();
    case Kind::Dict:
      return !as_object().items.empty();
    case Kind::Namespace:
    case Kind::Function:
      return true;
  }
  return false;
}

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |v| < 1e16.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  if (exponent < -4 || exponent >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  std::string out;
  if (exponent < 0) {
    out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
    out = digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<size_t>(exponent) + 1) + "." +
          digits.substr(static_cast<size_t>(exponent) + 1);
  }
  return sign + out;
}

static std::string python_string_repr(const std::string& s) {
  // Python picks single quotes unless the string has ' and no ".
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char32_t quote = has_single && !has_double ? '"' : '\'';
  std::string out;
  append_utf8(quote, out);
  for (size_t i = 0; i < s.size();) {
    const char32_t c = decode_utf8(s, i);
    char hex[16];
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c == quote) {
      out += '\\';
      append_utf8(c, out);
    } else if (py_isprintable(c))
      append_utf8(c, out);
    else {
      if (c < 0x100)
        std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000)
        std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(c));
      else
        std::snprintf(hex, sizeof hex, "\\U%08x", static_cast<unsigned>(c));
      out += hex;
    }
  }
  append_utf8(quote, out);
  return out;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined:
      return "";
    case Kind::String:
      return as_string();
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::Undefined:
      return "";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return as_bool() ? "True" : "False";
    case Kind::Int:
      return std::to_string(as_int());
    case Kind::Float:
      return python_float_repr(as_double());
    case Kind::String:
      return python_string_repr(as_string());
    case Kind::List: {
      const Array& a = as_array();
      std::string out = a.is_tuple ? "(" : "[";
      for (size_t i = 0; i < a.items.size(); ++i) {
        if (i) out += ", ";
        out += a.items[i].repr();
      }
      if (a.is_tuple && a.items.size() == 1) out += ",";
      return out + (a.is_tuple ? ")" : "]");
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : as_object().items) {
        if (!first) out += ", ";
        first = false;
        out += python_string_repr(k) + ": " + v.repr();
      }
      return out + "}";
    }
    case Kind::Namespace:
      return "<Namespace>";
    case Kind::Function:
      return "<function " + as_function().name + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      return as_array().is_tuple ? "tuple" : "list";
    case Kind::Dict:
      return "dict";
    case Kind::Namespace:
      return "Namespace";
    case Kind::Function:
      return "function";
  }
  return "?";
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return true;
    case Value::Kind::String:
      return a.as_string() == b.as_string();
    case Value::Kind::List: {
      const auto& x = a.as_array().items;
      const auto& y = b.as_array().items;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      const auto& x = a.as_object().items;
      const Object& y = b.as_object();
      if (x.size() != y.items.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = y.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::Namespace:
      return &a.namespace_object() == &b.namespace_object();
    case Value::Kind::Function:
      return &a.as_function() == &b.as_function();
    default:
      return false;
  }
}

static void json_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        ++i;
        continue;
      case '\\':
        out += "\\\\";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      case '\b':
        out += "\\b";
        ++i;
        continue;
      case '\f':
        out += "\\f";
        ++i;
        continue;
      default:
        break;
    }
    char hex[16];
    if (c < 0x20) {
      std::snprintf(hex, sizeof hex, "\\u%04x", c);
      out += hex;
      ++i;
    } else if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);
      ++i;
    } else {
      const char32_t cp = decode_utf8(s, i);  // advances i
      if (cp >= 0x10000) {
        const char32_t v = cp - 0x10000;
        std::snprintf(hex, sizeof hex, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      } else {
        std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(cp));
      }
      out += hex;
    }
  }
  out += '"';
}

static void json_value(const Value& v, const JsonOptions& o, int depth, std::string& out) {
  if (depth > 512) fail("tojson: value nested deeper than 512 levels");
  const std::string item_sep =
      !o.item_separator.empty() ? o.item_separator : (o.indent >= 0 ? "," : ", ");
  auto newline = [&](int level) {
    if (o.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(o.indent) * static_cast<size_t>(level), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::None:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::Float: {
      const double d = v.as_double();
      if (std::isnan(d))
        out += "NaN";
      else if (std::isinf(d))
        out += d > 0 ? "Infinity" : "-Infinity";
      else
        out += python_float_repr(d);
      return;
    }
    case Value::Kind::String:
      json_string(v.as_string(), o.ensure_ascii, out);
      return;
    case Value::Kind::List: {
      const auto& items = v.as_array().items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_value(items[i], o, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      if (v.is_namespace()) fail("tojson: Object of type Namespace is not JSON serializable");
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& item : v.as_object().items) items.push_back(&item);
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_string(items[i]->first, o.ensure_ascii, out);
        out += o.key_separator;
        json_value(items[i]->second, o, depth + 1, out);
      }
      newline(depth);
      out += '}';
      return;
    }
    case Value::Kind::Undefined:
      fail("tojson: Object of type Undefined is not JSON serializable");
    case Value::Kind::Function:
      fail("tojson: Object of type function is not JSON serializable");
  }
}

std::string to_json(const Value& value, const JsonOptions& options) {
  std::string out;
  json_value(value, options, 0, out);
  return out;
}

}  // namespace tern::jinja
