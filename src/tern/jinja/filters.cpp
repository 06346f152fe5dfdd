// Jinja's built-in filters (jinja2 3.1 semantics) plus transformers' tojson.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tern/jinja/builtins.h"
#include "tern/jinja/interpreter.h"
#include "tern/jinja/operators.h"
#include "tern/jinja/params.h"
#include "tern/jinja/text.h"

namespace tern::jinja {
namespace {

// Jinja's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Value lookup_path(Renderer& r, Value v, const std::string& path) {
  size_t pos = 0;
  while (true) {
    const size_t dot = path.find('.', pos);
    const std::string part =
        path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    v = digits ? r.get_item(v, Value(static_cast<int64_t>(std::strtoll(part.c_str(), nullptr, 10))))
               : r.get_item(v, Value(part));
    if (dot == std::string::npos) return v;
    pos = dot + 1;
  }
}

// The key a case-insensitive sort/unique/min/max compares by.
Value fold_case(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.as_string()));
  return v;
}

std::vector<Value> sorted(std::vector<Value> items, const std::function<Value(const Value&)>& key,
                          bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value& item : items) keyed.emplace_back(key(item), std::move(item));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? order(b.first, a.first) < 0 : order(a.first, b.first) < 0;
  });
  std::vector<Value> out;
  out.reserve(keyed.size());
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Python's int(str) for base 10: optional sign, digits with single underscores, spaces around.
std::optional<int64_t> parse_int(const std::string& text) {
  const std::string s = py_strip(text, nullptr, true, true);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i == s.size()) return std::nullopt;
  int64_t v = 0;
  bool last_digit = false;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && last_digit) {
      last_digit = false;
      continue;
    }
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s[i] - '0', &v))
      fail("integer overflow (tern's template integers are 64-bit)");
    last_digit = true;
  }
  if (!last_digit) return std::nullopt;
  return negative ? -v : v;
}

// Python's float(str): decimal or inf/nan spellings, spaces around.
std::optional<double> parse_float(const std::string& text) {
  const std::string s = py_strip(text, nullptr, true, true);
  if (s.empty()) return std::nullopt;
  for (char c : s)
    if (c == 'x' || c == 'X' || c == 'p' || c == 'P') return std::nullopt;  // strtod's hex floats
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

double python_round(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits == 0) return std::nearbyint(x);  // ties to even, as Python
  if (digits > 0) {
    if (digits > 300) return x;
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(digits), x);
    return std::strtod(buf, nullptr);
  }
  const double p = std::pow(10.0, static_cast<double>(-digits));
  return std::nearbyint(x / p) * p;
}

Value do_tojson(const Value& input, const CallArgs& args) {
  Params p("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = p.flag(0, false);
  if (p.has(1)) {
    const Value indent = p.get(1);
    if (indent.is_string())
      fail("tojson: a string indent is not supported; use a number of spaces");
    o.indent = static_cast<int>(std::clamp<int64_t>(p.integer(1, 0), 0, 64));
  }
  if (p.has(2)) {
    const std::vector<Value> seps = iterate(p.get(2));
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string())
      fail("tojson: separators must be two strings");
    o.item_separator = seps[0].as_string();
    o.key_separator = seps[1].as_string();
    if (o.item_separator.empty()) fail("tojson: an empty item separator is not supported");
  }
  o.sort_keys = p.flag(3, false);
  return Value(to_json(input, o));
}

Value do_indent(const Value& input, const CallArgs& args) {
  Params p("indent", args, {"width", "first", "blank"});
  std::string indention;
  const Value width = p.get(0, Value(4));
  if (width.is_string())
    indention = width.as_string();
  else
    indention =
        std::string(static_cast<size_t>(std::clamp<int64_t>(p.integer(0, 4), 0, 1024)), ' ');
  const bool first = p.flag(1, false), blank = p.flag(2, false);
  const std::vector<std::string> lines = py_splitlines(input.str() + "\n");
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) rv += '\n';
    if (i > 0 && (blank || !lines[i].empty())) rv += indention;
    rv += lines[i];
  }
  if (first) rv = indention + rv;
  return Value(std::move(rv));
}

Value do_title(const std::string& s) {
  // Jinja capitalises after '-', whitespace, '(', '{', '[' and '<', lowers the rest.
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = decode_utf8(s, i);
    const bool boundary =
        cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || py_isspace(cp);
    std::string one;
    append_utf8(cp, one);
    out += boundary ? one : (word_start ? py_upper(one) : py_lower(one));
    word_start = boundary;
  }
  return Value(std::move(out));
}

Value do_map(Renderer& r, const Value& input, CallArgs& args) {
  std::vector<Value> out;
  const std::vector<Value> items = iterate(input);
  r.count_iterations(items.size());
  for (const auto& [key, value] : args.keyword)
    if (key == "attribute") {
      Value fallback = Value::undefined();
      for (const auto& [k2, v2] : args.keyword)
        if (k2 == "default")
          fallback = v2;
        else if (k2 != "attribute")
          fail("map got an unexpected keyword argument '" + k2 + "'");
      if (!value.is_string()) fail("map: attribute must be a string");
      for (const Value& item : items) {
        Value v = lookup_path(r, item, value.as_string());
        out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
      }
      return Value::list(std::move(out));
    }
  if (args.positional.empty()) fail("map needs a filter name or attribute=");
  if (!args.positional[0].is_string()) fail("map: the filter name must be a string");
  const std::string filter = args.positional[0].as_string();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) out.push_back(apply_filter(r, filter, item, rest));
  return Value::list(std::move(out));
}

// select / reject / selectattr / rejectattr.
Value do_select(Renderer& r, const Value& input, CallArgs& args, bool with_attribute, bool keep) {
  size_t first = 0;
  std::string attribute;
  if (with_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string())
      fail("selectattr/rejectattr need an attribute name");
    attribute = args.positional[0].as_string();
    first = 1;
  }
  std::string test;
  if (args.positional.size() > first) {
    if (!args.positional[first].is_string()) fail("select/reject: the test name must be a string");
    test = args.positional[first].as_string();
  }
  CallArgs rest;
  if (args.positional.size() > first + 1)
    rest.positional.assign(args.positional.begin() + static_cast<ptrdiff_t>(first) + 1,
                           args.positional.end());
  rest.keyword = args.keyword;
  std::vector<Value> out;
  const std::vector<Value> items = iterate(input);
  r.count_iterations(items.size());
  for (const Value& item : items) {
    const Value subject = with_attribute ? lookup_path(r, item, attribute) : item;
    const bool passed = test.empty() ? subject.truthy() : apply_test(r, test, subject, rest);
    if (passed == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value min_max(Renderer& r, const Value& input, const CallArgs& args, bool want_max,
              const char* name) {
  Params p(name, args, {"case_sensitive", "attribute"});
  const bool cs = p.flag(0, false);
  const std::string attribute = p.has(1) ? p.str(1, "attribute") : "";
  const std::vector<Value> items = iterate(input);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& v) {
    return fold_case(attribute.empty() ? v : lookup_path(r, v, attribute), cs);
  };
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    const int c = order(k, best_key);
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

}  // namespace

Value apply_filter(Renderer& r, const std::string& name, const Value& input, CallArgs& args) {
  const std::string what = "filter '" + name + "'";
  auto no_args = [&] { Params(what, args, {}); };
  auto result_str = [&](std::string s) {
    r.check_size(s.size());
    return Value(std::move(s));
  };

  if (name == "tojson") return result_str(do_tojson(input, args).as_string());
  if (name == "trim") {
    Params p(what, args, {"chars"});
    const std::string chars = p.has(0) ? p.str(0, "chars") : "";
    return Value(py_strip(input.str(), p.has(0) ? &chars : nullptr, true, true));
  }
  if (name == "length" || name == "count") {
    no_args();
    if (input.is_undefined()) return Value(0);
    return Value(length(input));
  }
  if (name == "upper") return no_args(), Value(py_upper(input.str()));
  if (name == "lower") return no_args(), Value(py_lower(input.str()));
  if (name == "title") return no_args(), do_title(input.str());
  if (name == "capitalize") return no_args(), Value(py_capitalize(input.str()));
  if (name == "string") return no_args(), Value(input.str());
  if (name == "safe") return no_args(), input;
  if (name == "escape" || name == "e" || name == "forceescape")
    return no_args(), Value(html_escape(input.str()));
  if (name == "replace") {
    Params p(what, args, {"old", "new", "count"});
    return result_str(py_replace(input.str(), p.str(0, "old"), p.str(1, "new"), p.integer(2, -1)));
  }
  if (name == "default" || name == "d") {
    Params p(what, args, {"default_value", "boolean"});
    const bool use_default = input.is_undefined() || (p.flag(1, false) && !input.truthy());
    return use_default ? p.get(0, Value(std::string())) : input;
  }
  if (name == "join") {
    Params p(what, args, {"d", "attribute"});
    const std::string sep = p.has(0) ? p.str(0, "d") : "";
    const std::string attribute = p.has(1) ? p.get(1).str() : "";
    std::string out;
    bool first = true;
    for (const Value& item : iterate(input)) {
      if (!first) out += sep;
      first = false;
      out += (attribute.empty() ? item : lookup_path(r, item, attribute)).str();
      r.check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "first" || name == "last") {
    no_args();
    const std::vector<Value> items = iterate(input);
    if (items.empty()) return Value::undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return no_args(), Value::list(iterate(input));
  if (name == "items") {
    no_args();
    if (input.is_undefined()) return Value::list({});
    if (!input.is_dict())
      fail("filter 'items': can only get item pairs from a mapping, not " + input.type_name());
    std::vector<Value> pairs;
    for (const auto& [k, v] : input.as_object().items)
      pairs.push_back(Value::list({Value(k), v}, true));
    return Value::list(std::move(pairs));
  }
  if (name == "dictsort") {
    Params p(what, args, {"case_sensitive", "by", "reverse"});
    if (!input.is_dict()) fail("filter 'dictsort' needs a dict, not " + input.type_name());
    const bool cs = p.flag(0, false);
    const std::string by = p.has(1) ? p.str(1, "by") : "key";
    if (by != "key" && by != "value") fail("filter 'dictsort': by must be 'key' or 'value'");
    std::vector<Value> pairs;
    for (const auto& [k, v] : input.as_object().items)
      pairs.push_back(Value::list({Value(k), v}, true));
    const size_t pos = by == "key" ? 0 : 1;
    return Value::list(sorted(
        std::move(pairs),
        [&](const Value& pair) { return fold_case(pair.as_array().items[pos], cs); },
        p.flag(2, false)));
  }
  if (name == "sort") {
    Params p(what, args, {"reverse", "case_sensitive", "attribute"});
    const bool cs = p.flag(1, false);
    const std::string attribute = p.has(2) ? p.get(2).str() : "";
    return Value::list(sorted(
        iterate(input),
        [&](const Value& v) {
          return fold_case(attribute.empty() ? v : lookup_path(r, v, attribute), cs);
        },
        p.flag(0, false)));
  }
  if (name == "unique") {
    Params p(what, args, {"case_sensitive", "attribute"});
    const bool cs = p.flag(0, false);
    const std::string attribute = p.has(1) ? p.get(1).str() : "";
    std::vector<Value> out, seen;
    const std::vector<Value> items = iterate(input);
    r.count_iterations(items.size() * items.size() / 64);
    for (const Value& item : items) {
      Value key = fold_case(attribute.empty() ? item : lookup_path(r, item, attribute), cs);
      if (std::any_of(seen.begin(), seen.end(),
                      [&](const Value& s) { return values_equal(s, key); }))
        continue;
      seen.push_back(std::move(key));
      out.push_back(item);
    }
    return Value::list(std::move(out));
  }
  if (name == "reverse") {
    no_args();
    if (input.is_string()) {
      std::vector<char32_t> cps = to_code_points(input.as_string());
      std::reverse(cps.begin(), cps.end());
      return Value(from_code_points(cps));
    }
    std::vector<Value> items = iterate(input);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "map") return do_map(r, input, args);
  if (name == "select" || name == "reject")
    return do_select(r, input, args, false, name == "select");
  if (name == "selectattr" || name == "rejectattr")
    return do_select(r, input, args, true, name == "selectattr");
  if (name == "attr") {
    Params p(what, args, {"name"});
    return r.get_attribute(input, p.str(0, "name"));
  }
  if (name == "abs") {
    no_args();
    if (input.is_float()) return Value(std::fabs(input.as_double()));
    if (input.is_number()) return input.as_int() < 0 ? negate(input) : Value(input.as_int());
    fail("bad operand type for abs(): '" + input.type_name() + "'");
  }
  if (name == "int") {
    Params p(what, args, {"default", "base"});
    const Value fallback = p.get(0, Value(0));
    if (p.integer(1, 10) != 10) fail("filter 'int': only base 10 is supported");
    if (input.is_bool() || input.is_int()) return Value(input.as_int());
    if (input.is_float()) {
      const double d = std::trunc(input.as_double());
      if (!std::isfinite(d) || std::fabs(d) >= 9.2e18)
        fail("filter 'int': cannot convert " + input.repr() + " to a 64-bit integer");
      return Value(static_cast<int64_t>(d));
    }
    if (input.is_string()) {
      if (std::optional<int64_t> v = parse_int(input.as_string())) return Value(*v);
      if (std::optional<double> d = parse_float(input.as_string())) {
        if (!std::isfinite(*d) || std::fabs(*d) >= 9.2e18)
          fail("filter 'int': cannot convert " + input.repr() + " to a 64-bit integer");
        return Value(static_cast<int64_t>(std::trunc(*d)));
      }
    }
    return fallback;
  }
  if (name == "float") {
    Params p(what, args, {"default"});
    const Value fallback = p.get(0, Value(0.0));
    if (input.is_number()) return Value(input.as_double());
    if (input.is_string())
      if (std::optional<double> d = parse_float(input.as_string())) return Value(*d);
    return fallback;
  }
  if (name == "round") {
    Params p(what, args, {"precision", "method"});
    const int64_t precision = p.integer(0, 0);
    const std::string method = p.has(1) ? p.str(1, "method") : "common";
    if (!input.is_number()) fail("filter 'round' needs a number, not " + input.type_name());
    if (method == "common") {
      if (!input.is_float()) return Value(input.as_int());  // round(int, n) stays an int
      return Value(python_round(input.as_double(), precision));
    }
    if (method != "ceil" && method != "floor")
      fail("filter 'round': method must be common, ceil or floor");
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = input.as_double() * scale;
    return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (name == "sum") {
    Params p(what, args, {"attribute", "start"});
    Value total = p.get(1, Value(0));
    const std::string attribute = p.has(0) ? p.get(0).str() : "";
    for (const Value& item : iterate(input))
      total = binary_op("+", total, attribute.empty() ? item : lookup_path(r, item, attribute),
                        1u << 26);
    return total;
  }
  if (name == "max") return min_max(r, input, args, true, "filter 'max'");
  if (name == "min") return min_max(r, input, args, false, "filter 'min'");
  if (name == "indent") return result_str(do_indent(input, args).as_string());
  if (name == "center") {
    Params p(what, args, {"width"});
    const std::string s = input.str();
    const int64_t width = std::min<int64_t>(p.integer(0, 80), 1 << 20);
    const int64_t n = static_cast<int64_t>(code_point_count(s));
    if (width <= n) return Value(s);
    const int64_t marg = width - n;
    const int64_t left = marg / 2 + (marg & width & 1);
    return Value(std::string(static_cast<size_t>(left), ' ') + s +
                 std::string(static_cast<size_t>(marg - left), ' '));
  }
  if (name == "wordcount") {
    no_args();
    const std::string s = input.str();
    int64_t words = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.size();) {
      const char32_t cp = decode_utf8(s, i);
      const bool w = cp == '_' || py_isalnum(cp);
      if (w && !in_word) ++words;
      in_word = w;
    }
    return Value(words);
  }
  static const char* const kUnsupported[] = {
      "batch",     "slice",   "groupby",        "format", "truncate",  "wordwrap", "urlize",
      "urlencode", "xmlattr", "filesizeformat", "pprint", "striptags", "random"};
  for (const char* u : kUnsupported)
    if (name == u) fail("the '" + name + "' filter is not supported by tern's template engine");
  fail("no filter named '" + name + "'");
}

}  // namespace tern::jinja
