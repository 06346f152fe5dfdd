// Jinja's tests, the str/list/dict methods templates call, and the global functions
// transformers provides (raise_exception, strftime_now) besides Jinja's own.
#include <ctime>

#include "tern/jinja/builtins.h"
#include "tern/jinja/interpreter.h"
#include "tern/jinja/operators.h"
#include "tern/jinja/params.h"
#include "tern/jinja/text.h"

namespace tern::jinja {
namespace {

Value bound(const std::string& name, std::function<Value(CallArgs&, Renderer&)> fn) {
  return Value::function(name, std::move(fn));
}

// str.format with "{}", "{0}" and "{name}" fields; format specs and conversions are refused
// rather than rendered differently from Python.
std::string str_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      fail("str.format: single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) fail("str.format: single '{' encountered in format string");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos)
      fail("str.format: format specs, conversions and field lookups are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= args.positional.size()) fail("str.format: not enough arguments");
      v = &args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(),
                           [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t k = std::strtoul(field.c_str(), nullptr, 10);
      if (k >= args.positional.size())
        fail("str.format: argument index " + field + " out of range");
      v = &args.positional[k];
    } else {
      for (const auto& [key, value] : args.keyword)
        if (key == field) v = &value;
      if (!v) fail("str.format: no argument named '" + field + "'");
    }
    out += v->str();
    i = close;
  }
  return out;
}

bool prefix_test(const std::string& s, const Value& arg, bool suffix, const char* what) {
  auto one = [&](const Value& p) {
    if (!p.is_string())
      fail(std::string(what) + " arg must be str or a tuple of str, not " + p.type_name());
    const std::string& x = p.as_string();
    if (x.size() > s.size()) return false;
    return suffix ? s.compare(s.size() - x.size(), x.size(), x) == 0
                  : s.compare(0, x.size(), x) == 0;
  };
  if (arg.is_list()) {
    for (const Value& p : arg.as_array().items)
      if (one(p)) return true;
    return false;
  }
  return one(arg);
}

std::optional<Value> string_method(const std::string& s, const std::string& name) {
  const std::string what = "str." + name;
  auto pred = [&](bool (*is)(char32_t)) {
    return bound(what, [s, what, is](CallArgs& args, Renderer&) {
      Params(what, args, {});
      if (s.empty()) return Value(false);
      for (size_t i = 0; i < s.size();)
        if (!is(decode_utf8(s, i))) return Value(false);
      return Value(true);
    });
  };
  if (name == "startswith" || name == "endswith")
    return bound(what, [s, what, name](CallArgs& args, Renderer&) {
      Params p(what, args, {"prefix"});
      return Value(prefix_test(s, p.required(0, "prefix"), name == "endswith", what.c_str()));
    });
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return bound(what, [s, what, name](CallArgs& args, Renderer&) {
      Params p(what, args, {"chars"});
      const std::string chars = p.has(0) ? p.str(0, "chars") : "";
      return Value(py_strip(s, p.has(0) ? &chars : nullptr, name != "rstrip", name != "lstrip"));
    });
  if (name == "split" || name == "rsplit")
    return bound(what, [s, what, name](CallArgs& args, Renderer& r) {
      Params p(what, args, {"sep", "maxsplit"});
      const std::string sep = p.has(0) ? p.str(0, "sep") : "";
      if (p.has(0) && sep.empty()) fail(what + ": empty separator");
      std::vector<Value> parts;
      for (std::string& part :
           py_split(s, p.has(0) ? &sep : nullptr, p.integer(1, -1), name == "rsplit"))
        parts.emplace_back(std::move(part));
      r.count_iterations(parts.size());
      return Value::list(std::move(parts));
    });
  if (name == "splitlines")
    return bound(what, [s, what](CallArgs& args, Renderer&) {
      Params p(what, args, {"keepends"});
      std::vector<Value> lines;
      for (std::string& line : py_splitlines(s, p.flag(0, false)))
        lines.emplace_back(std::move(line));
      return Value::list(std::move(lines));
    });
  if (name == "replace")
    return bound(what, [s, what](CallArgs& args, Renderer& r) {
      Params p(what, args, {"old", "new", "count"});
      std::string out = py_replace(s, p.str(0, "old"), p.str(1, "new"), p.integer(2, -1));
      r.check_size(out.size());
      return Value(std::move(out));
    });
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize")
    return bound(what, [s, what, name](CallArgs& args, Renderer&) {
      Params(what, args, {});
      if (name == "upper") return Value(py_upper(s));
      if (name == "lower") return Value(py_lower(s));
      if (name == "title") return Value(py_title(s));
      return Value(py_capitalize(s));
    });
  if (name == "count" || name == "find" || name == "rfind")
    return bound(what, [s, what, name](CallArgs& args, Renderer&) {
      Params p(what, args, {"sub"});
      const std::string sub = p.str(0, "sub");
      if (name == "count") return Value(py_count(s, sub));
      return Value(py_find(s, sub, name == "rfind"));
    });
  if (name == "removeprefix" || name == "removesuffix")
    return bound(what, [s, what, name](CallArgs& args, Renderer&) {
      Params p(what, args, {"affix"});
      const std::string x = p.str(0, "affix");
      if (!prefix_test(s, Value(x), name == "removesuffix", what.c_str())) return Value(s);
      return Value(name == "removeprefix" ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
    });
  if (name == "join")
    return bound(what, [s, what](CallArgs& args, Renderer& r) {
      Params p(what, args, {"iterable"});
      std::string out;
      bool first = true;
      for (const Value& item : iterate(p.required(0, "iterable"))) {
        if (!item.is_string())
          fail(what + ": expected str instance, " + item.type_name() + " found");
        if (!first) out += s;
        first = false;
        out += item.as_string();
        r.check_size(out.size());
      }
      return Value(std::move(out));
    });
  if (name == "format")
    return bound(what, [s](CallArgs& args, Renderer& r) {
      std::string out = str_format(s, args);
      r.check_size(out.size());
      return Value(std::move(out));
    });
  if (name == "isdigit") return pred(py_isdigit);
  if (name == "isalpha") return pred(py_isalpha);
  if (name == "isalnum") return pred(py_isalnum);
  if (name == "isspace") return pred(py_isspace);
  if (name == "islower" || name == "isupper")
    return bound(what, [s, what, name](CallArgs& args, Renderer&) {
      Params(what, args, {});
      bool cased = false;
      for (size_t i = 0; i < s.size();) {
        const char32_t cp = decode_utf8(s, i);
        if (name == "islower" ? py_isupper_cased(cp) : py_islower_cased(cp)) return Value(false);
        cased = cased || py_isupper_cased(cp) || py_islower_cased(cp);
      }
      return Value(cased);
    });
  static const char* const kOther[] = {
      "center",       "ljust",       "rjust",      "zfill",    "partition", "rpartition",
      "index",        "rindex",      "expandtabs", "swapcase", "casefold",  "encode",
      "translate",    "maketrans",   "format_map", "istitle",  "isnumeric", "isdecimal",
      "isidentifier", "isprintable", "isascii"};
  for (const char* other : kOther)
    if (name == other)
      return bound(what, [what](CallArgs&, Renderer&) -> Value {
        fail(what + "() is not supported by tern's template engine");
      });
  return std::nullopt;
}

std::optional<Value> dict_method(const Value& d, const std::string& name) {
  const std::string what = "dict." + name;
  if (name == "items" || name == "keys" || name == "values")
    return bound(what, [d, what, name](CallArgs& args, Renderer&) {
      Params(what, args, {});
      std::vector<Value> out;
      for (const auto& [k, v] : d.as_object().items) {
        if (name == "items")
          out.push_back(Value::list({Value(k), v}, true));
        else if (name == "keys")
          out.emplace_back(k);
        else
          out.push_back(v);
      }
      return Value::list(std::move(out));
    });
  if (name == "get")
    return bound(what, [d, what](CallArgs& args, Renderer&) {
      Params p(what, args, {"key", "default"});
      const Value key = p.required(0, "key");
      if (key.is_string())
        if (const Value* v = d.as_object().find(key.as_string())) return *v;
      return p.get(1, Value::none());
    });
  static const char* const kMutating[] = {"pop",   "popitem", "update",  "setdefault",
                                          "clear", "copy",    "fromkeys"};
  for (const char* m : kMutating)
    if (name == m)
      return bound(what, [what](CallArgs&, Renderer&) -> Value {
        fail(
            what +
            "() is not allowed: chat templates render in an immutable sandbox, as in transformers");
      });
  return std::nullopt;
}

std::optional<Value> list_method(const Value& l, const std::string& name) {
  const std::string what = l.type_name() + "." + name;
  if (name == "count" || name == "index")
    return bound(what, [l, what, name](CallArgs& args, Renderer&) {
      Params p(what, args, {"value"});
      const Value x = p.required(0, "value");
      int64_t count = 0;
      const auto& items = l.as_array().items;
      for (size_t i = 0; i < items.size(); ++i)
        if (values_equal(items[i], x)) {
          if (name == "index") return Value(static_cast<int64_t>(i));
          ++count;
        }
      if (name == "index") fail(what + "(x): x not in list");
      return Value(count);
    });
  static const char* const kMutating[] = {"append", "extend", "insert",  "pop", "remove",
                                          "clear",  "sort",   "reverse", "copy"};
  for (const char* m : kMutating)
    if (name == m)
      return bound(what, [what](CallArgs&, Renderer&) -> Value {
        fail(
            what +
            "() is not allowed: chat templates render in an immutable sandbox, as in transformers");
      });
  return std::nullopt;
}

bool is_test(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

}  // namespace

std::optional<Value> find_method(const Value& object, const std::string& name) {
  if (object.is_string()) return string_method(object.as_string(), name);
  if (object.is_dict()) return dict_method(object, name);
  if (object.is_list()) return list_method(object, name);
  return std::nullopt;
}

bool apply_test(Renderer& r, const std::string& name, const Value& v, CallArgs& args) {
  const std::string what = "test '" + name + "'";
  auto none = [&] { Params(what, args, {}); };
  auto other = [&] { return Params(what, args, {"other"}).required(0, "other"); };
  if (name == "defined") return none(), !v.is_undefined();
  if (name == "undefined") return none(), v.is_undefined();
  if (name == "none") return none(), v.is_none();
  if (name == "boolean") return none(), v.is_bool();
  if (name == "true") return none(), v.is_bool() && v.as_bool();
  if (name == "false") return none(), v.is_bool() && !v.as_bool();
  if (name == "integer") return none(), v.is_int();
  if (name == "float") return none(), v.is_float();
  if (name == "number") return none(), v.is_number();
  if (name == "string") return none(), v.is_string();
  if (name == "mapping") return none(), v.is_dict();
  if (name == "iterable")
    return none(), v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return none(), v.is_string() || v.is_list() || v.is_dict();
  if (name == "callable") return none(), v.is_function();
  if (name == "escaped") return none(), false;
  if (name == "lower" || name == "upper") {
    none();
    const std::string s = v.str();
    bool cased = false;
    for (size_t i = 0; i < s.size();) {
      const char32_t cp = decode_utf8(s, i);
      if (name == "lower" ? py_isupper_cased(cp) : py_islower_cased(cp)) return false;
      cased = cased || py_isupper_cased(cp) || py_islower_cased(cp);
    }
    return cased;
  }
  if (name == "even" || name == "odd") {
    none();
    if (!v.is_number()) fail(what + " needs a number, not " + v.type_name());
    const bool even = values_equal(binary_op("%", v, Value(2), 0), Value(0));
    return name == "even" ? even : !even;
  }
  if (name == "divisibleby") {
    const Value n = Params(what, args, {"num"}).required(0, "num");
    return values_equal(binary_op("%", v, n, 0), Value(0));
  }
  if (name == "sameas") {
    const Value o = other();
    if (v.is_none() || v.is_bool() || o.is_none() || o.is_bool())
      return v.kind() == o.kind() && values_equal(v, o);
    return (v.is_namespace() || v.is_function()) && values_equal(v, o);
  }
  if (name == "in") return contains(Params(what, args, {"seq"}).required(0, "seq"), v);
  if (is_test(name, {"eq", "equalto", "=="})) return values_equal(v, other());
  if (is_test(name, {"ne", "!="})) return !values_equal(v, other());
  if (is_test(name, {"lt", "lessthan", "<"})) return order(v, other()) < 0;
  if (is_test(name, {"le", "<="})) return order(v, other()) <= 0;
  if (is_test(name, {"gt", "greaterthan", ">"})) return order(v, other()) > 0;
  if (is_test(name, {"ge", ">="})) return order(v, other()) >= 0;
  if (name == "filter" || name == "test") {
    const Value n = Params(what, args, {"name"}).required(0, "name");
    if (!n.is_string()) return false;
    static const char* const kFilters[] = {
        "tojson",     "trim",       "length", "count",   "upper",  "lower",       "title",
        "capitalize", "string",     "safe",   "escape",  "e",      "forceescape", "replace",
        "default",    "d",          "join",   "first",   "last",   "list",        "items",
        "dictsort",   "sort",       "unique", "reverse", "map",    "select",      "reject",
        "selectattr", "rejectattr", "attr",   "abs",     "int",    "float",       "round",
        "sum",        "max",        "min",    "indent",  "center", "wordcount"};
    static const char* const kTests[] = {
        "defined", "undefined",   "none",    "boolean", "true",     "false",       "integer",
        "float",   "number",      "string",  "mapping", "iterable", "sequence",    "callable",
        "escaped", "lower",       "upper",   "even",    "odd",      "divisibleby", "sameas",
        "in",      "eq",          "equalto", "ne",      "lt",       "lessthan",    "le",
        "gt",      "greaterthan", "ge",      "filter",  "test",     "==",          "!=",
        "<",       "<=",          ">",       ">="};
    for (const char* f : name == "filter"
                             ? std::vector<const char*>(std::begin(kFilters), std::end(kFilters))
                             : std::vector<const char*>(std::begin(kTests), std::end(kTests)))
      if (n.as_string() == f) return true;
    return false;
  }
  (void)r;
  fail("no test named '" + name + "'");
}

const Object& builtin_globals() {
  static const Object globals = [] {
    Object g;
    g.set("range", Value::function("range", [](CallArgs& args, Renderer& r) {
            if (!args.keyword.empty()) fail("range() takes no keyword arguments");
            std::vector<int64_t> n;
            for (const Value& v : args.positional) {
              if (!v.is_number() || v.is_float())
                fail("range() arguments must be integers, not " + v.type_name());
              n.push_back(v.as_int());
            }
            if (n.empty() || n.size() > 3)
              fail("range expects 1 to 3 arguments, got " + std::to_string(n.size()));
            const int64_t start = n.size() == 1 ? 0 : n[0], stop = n.size() == 1 ? n[0] : n[1],
                          step = n.size() == 3 ? n[2] : 1;
            if (step == 0) fail("range() arg 3 must not be zero");
            // jinja2's sandbox refuses ranges over 100,000 items (MAX_RANGE).
            const double count =
                std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) /
                                        static_cast<double>(step)));
            if (count > 100000)
              fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
            r.count_iterations(static_cast<size_t>(count));
            std::vector<Value> out;
            for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
            return Value::list(std::move(out));
          }));
    g.set("namespace", Value::function("namespace", [](CallArgs& args, Renderer& r) {
            Object o;
            if (args.positional.size() > 1)
              fail("namespace() takes at most one positional argument (a dict)");
            if (!args.positional.empty()) {
              if (!args.positional[0].is_dict())
                fail("namespace() positional argument must be a dict");
              o = args.positional[0].as_object();
            }
            for (const auto& [k, v] : args.keyword) o.set(k, v);
            return r.make_namespace(std::move(o));
          }));
    g.set("dict", Value::function("dict", [](CallArgs& args, Renderer&) {
            Object o;
            if (!args.positional.empty())
              fail("dict() takes only keyword arguments in tern's templates");
            for (const auto& [k, v] : args.keyword) o.set(k, v);
            return Value::dict(std::move(o));
          }));
    g.set("raise_exception",
          Value::function("raise_exception", [](CallArgs& args, Renderer&) -> Value {
            Params p("raise_exception", args, {"message"});
            fail("raise_exception: " + p.required(0, "message").str());
          }));
    g.set("strftime_now", Value::function("strftime_now", [](CallArgs& args, Renderer&) {
            Params p("strftime_now", args, {"format"});
            const std::string format = p.str(0, "format");
            const std::time_t now = std::time(nullptr);
            std::tm local{};
            localtime_r(&now, &local);
            std::string out(256 + format.size() * 8, '\0');
            const size_t n = std::strftime(out.data(), out.size(), format.c_str(), &local);
            if (n == 0 && !format.empty())
              fail("strftime_now: format produced no output: " + format);
            out.resize(n);
            return Value(std::move(out));
          }));
    return g;
  }();
  return globals;
}

}  // namespace tern::jinja
