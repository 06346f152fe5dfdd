// Python operator semantics over Value, with the exact TypeError wording users know.
#include "tern/jinja/operators.h"

#include <cmath>

#include "tern/jinja/fault.h"
#include "tern/jinja/text.h"

namespace tern::jinja {

void fail_undefined(const Value& undefined) {
  fail(undefined.undefined_hint().empty() ? std::string("value is undefined")
                                          : undefined.undefined_hint());
}

static void fail_types(const std::string& op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() +
       "'");
}

[[noreturn]] static void fail_overflow() {
  fail("integer overflow (tern's template integers are 64-bit)");
}

static Value int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) fail("ZeroDivisionError: 0 cannot be raised to a negative power");
    return Value(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  while (exp > 0) {
    if ((exp & 1) && __builtin_mul_overflow(result, base, &result)) fail_overflow();
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) fail_overflow();
  }
  return Value(result);
}

static Value repeat(const Value& seq, int64_t times, size_t max_bytes) {
  if (times <= 0)
    return seq.is_string() ? Value(std::string()) : Value::list({}, seq.as_array().is_tuple);
  if (seq.is_string()) {
    const size_t n = seq.as_string().size();
    if (n != 0 && static_cast<uint64_t>(times) > max_bytes / n)
      fail("string repetition result is larger than the output limit");
    std::string out;
    out.reserve(n * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  const auto& items = seq.as_array().items;
  if (!items.empty() && static_cast<uint64_t>(times) > max_bytes / (64 * items.size()))
    fail("list repetition result is larger than the output limit");
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.as_array().is_tuple);
}

Value binary_op(const std::string& op, const Value& a, const Value& b, size_t max_bytes) {
  if (op == "~") {
    std::string s = a.str() + b.str();
    if (s.size() > max_bytes) fail("string is larger than the output limit");
    return Value(std::move(s));
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool numbers = a.is_number() && b.is_number();
  const bool floats = numbers && (a.is_float() || b.is_float());
  if (op == "+") {
    if (numbers) {
      if (floats) return Value(a.as_double() + b.as_double());
      int64_t r;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) fail_overflow();
      return Value(r);
    }
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > max_bytes)
        fail("string is larger than the output limit");
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.as_array().is_tuple == b.as_array().is_tuple) {
      std::vector<Value> items = a.as_array().items;
      items.insert(items.end(), b.as_array().items.begin(), b.as_array().items.end());
      if (items.size() * 64 > max_bytes) fail("list is larger than the output limit");
      return Value::list(std::move(items), a.as_array().is_tuple);
    }
    if (a.is_string()) fail("can only concatenate str (not \"" + b.type_name() + "\") to str");
    if (a.is_list())
      fail("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " +
           a.type_name());
    fail_types("+", a, b);
  }
  if (op == "*") {
    if (numbers) {
      if (floats) return Value(a.as_double() * b.as_double());
      int64_t r;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) fail_overflow();
      return Value(r);
    }
    if ((a.is_string() || a.is_list()) && b.is_number() && !b.is_float())
      return repeat(a, b.as_int(), max_bytes);
    if ((b.is_string() || b.is_list()) && a.is_number() && !a.is_float())
      return repeat(b, a.as_int(), max_bytes);
    fail_types("*", a, b);
  }
  if (op == "%" && a.is_string())
    fail("printf-style string formatting ('...' % value) is not supported");
  if (!numbers) fail_types(op, a, b);
  if (op == "-") {
    if (floats) return Value(a.as_double() - b.as_double());
    int64_t r;
    if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) fail_overflow();
    return Value(r);
  }
  if (op == "/") {
    if (b.as_double() == 0.0) fail("ZeroDivisionError: division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (b.as_double() == 0.0)
      fail(op == "//" ? "ZeroDivisionError: integer division or modulo by zero"
                      : "ZeroDivisionError: modulo by zero");
    if (floats) {
      // CPython's float divmod, so -7.5 // 2 == -4.0 and -7.5 % 2 == 0.5.
      const double x = a.as_double(), y = b.as_double();
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0.0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      if (op == "%") return Value(mod);
      if (div == 0.0) return Value(std::copysign(0.0, x / y));
      double floordiv = std::floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
      return Value(floordiv);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    if (x == INT64_MIN && y == -1) fail("integer overflow (tern's template integers are 64-bit)");
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      --q;
      r += y;
    }
    return Value(op == "//" ? q : r);
  }
  if (op == "**") {
    if (!floats) return int_pow(a.as_int(), b.as_int());
    const double x = a.as_double(), y = b.as_double();
    if (x == 0.0 && y < 0) fail("ZeroDivisionError: 0.0 cannot be raised to a negative power");
    if (x < 0 && y != std::floor(y))
      fail("a negative number to a fractional power is complex, which templates cannot use");
    return Value(std::pow(x, y));
  }
  fail("unknown operator " + op);
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return Value(-v.as_double());
  if (v.is_number()) {
    if (v.as_int() == INT64_MIN) fail("integer overflow (tern's template integers are 64-bit)");
    return Value(-v.as_int());
  }
  fail("bad operand type for unary -: '" + v.type_name() + "'");
}

int order(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order, as Python compares.
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const auto& x = a.as_array().items;
    const auto& y = b.as_array().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return order(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  fail("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() +
       "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::String:
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::List:
      for (const Value& v : container.as_array().items)
        if (values_equal(v, item)) return true;
      return false;
    case Value::Kind::Dict:
      return item.is_string() && container.as_object().find(item.as_string()) != nullptr;
    case Value::Kind::Undefined:
      return false;
    default:
      fail("argument of type '" + container.type_name() + "' is not iterable");
  }
}

bool compare_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return values_equal(a, b);
  if (op == "!=") return !values_equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  const int c = order(a, b);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  if (op == ">=") return c >= 0;
  fail("unknown comparison " + op);
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::List:
      return v.as_array().items;
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& item : v.as_object().items) keys.emplace_back(item.first);
      return keys;
    }
    case Value::Kind::String: {
      std::vector<Value> chars;
      const std::string& s = v.as_string();
      for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        decode_utf8(s, i);
        chars.emplace_back(s.substr(start, i - start));
      }
      return chars;
    }
    default:
      fail("'" + v.type_name() + "' object is not iterable");
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return 0;
    case Value::Kind::String:
      return static_cast<int64_t>(code_point_count(v.as_string()));
    case Value::Kind::List:
      return static_cast<int64_t>(v.as_array().items.size());
    case Value::Kind::Dict:
      return static_cast<int64_t>(v.as_object().items.size());
    default:
      fail("object of type '" + v.type_name() + "' has no len()");
  }
}

}  // namespace tern::jinja
