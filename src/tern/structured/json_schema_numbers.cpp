// Bounded integers and numbers as digit automata. A value splits by sign into a range of
// magnitudes; the magnitude's whole part into runs of one digit count, each an automaton over
// its digits; the fraction is constrained only where the whole part equals a bound's.
#include "tern/structured/json_schema_numbers.h"

#include <cctype>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "tern/core/error.h"

namespace tern::structured {
namespace {

using nlohmann::json;

// A decimal value: whole digits without leading zeros ("0" for none), fraction digits without
// trailing zeros (so fractions compare as strings); zero is never negative.
struct Decimal {
  bool negative = false;
  std::string whole = "0";
  std::string fraction;
};

struct Bound {
  Decimal value;
  bool strict = false;  // exclusive
  std::string text;     // for messages: "'minimum' 1.5"
};

struct Bounds {
  std::optional<Bound> lower, upper;
};

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw Error(what + " at " + (path.empty() ? "/" : path));
}

// nlohmann writes a double in its shortest round-trip form ("1.1", "3.0", "1e+20"), so its
// digits are the decimal the schema's author wrote, not the double's binary expansion.
Decimal decimal_of(const json& number) {
  const std::string s = number.dump();
  Decimal d;
  size_t i = 0;
  if (i < s.size() && s[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::string digits;
  int64_t point = -1;
  for (; i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'); ++i) {
    if (s[i] == '.')
      point = static_cast<int64_t>(digits.size());
    else
      digits += s[i];
  }
  if (point < 0) point = static_cast<int64_t>(digits.size());
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) point += std::stoll(s.substr(i + 1));
  const auto n = static_cast<int64_t>(digits.size());
  if (point <= 0) {
    d.whole = "";
    d.fraction = std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (point >= n) {
    d.whole = digits + std::string(static_cast<size_t>(point - n), '0');
    d.fraction = "";
  } else {
    d.whole = digits.substr(0, static_cast<size_t>(point));
    d.fraction = digits.substr(static_cast<size_t>(point));
  }
  const size_t first = d.whole.find_first_not_of('0');
  d.whole = first == std::string::npos ? "0" : d.whole.substr(first);
  const size_t last = d.fraction.find_last_not_of('0');
  d.fraction = last == std::string::npos ? "" : d.fraction.substr(0, last + 1);
  if (d.whole == "0" && d.fraction.empty()) d.negative = false;
  return d;
}

int compare_magnitudes(const Decimal& a, const Decimal& b) {
  if (a.whole.size() != b.whole.size()) return a.whole.size() < b.whole.size() ? -1 : 1;
  if (const int c = a.whole.compare(b.whole); c != 0) return c < 0 ? -1 : 1;
  if (const int c = a.fraction.compare(b.fraction); c != 0) return c < 0 ? -1 : 1;
  return 0;
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int m = compare_magnitudes(a, b);
  return a.negative ? -m : m;
}

Bound negated(const Bound& b) {
  Bound n = b;
  n.value.negative = !n.value.negative && (n.value.whole != "0" || !n.value.fraction.empty());
  return n;
}

Bounds read_bounds(const json& s, const std::string& path) {
  auto flag = [&](const char* key) {
    const auto it = s.find(key);
    return it != s.end() && it->is_boolean() && it->get<bool>();
  };
  // `exclusive`: the key is exclusiveMinimum or exclusiveMaximum, which may be draft 4's flag.
  auto bound = [&](const char* key, bool strict, bool exclusive) -> std::optional<Bound> {
    const auto it = s.find(key);
    if (it == s.end() || (exclusive && it->is_boolean())) return std::nullopt;
    if (!it->is_number() || (it->is_number_float() && !std::isfinite(it->get<double>())))
      fail(std::string("'") + key + "' must be a number", path);
    return Bound{decimal_of(*it), strict, std::string("'") + key + "' " + it->dump()};
  };
  // The tighter of two bounds on one side; `sign` 1 for lower bounds (the larger wins).
  auto tighter = [](std::optional<Bound>& into, std::optional<Bound> b, int sign) {
    if (!b) return;
    const int c = into ? compare(b->value, into->value) * sign : 1;
    if (c > 0 || (c == 0 && b->strict)) into = std::move(b);
  };
  for (const auto& [key, plain] :
       {std::pair{"exclusiveMinimum", "minimum"}, std::pair{"exclusiveMaximum", "maximum"}}) {
    const auto it = s.find(key);
    if (it != s.end() && *it == json(true) && !s.contains(plain))
      fail(std::string("'") + key + "' as a boolean needs '" + plain + "'", path);
  }
  Bounds b;
  // Draft 4 wrote exclusiveMinimum: true to make minimum exclusive.
  tighter(b.lower, bound("minimum", flag("exclusiveMinimum"), false), 1);
  tighter(b.lower, bound("exclusiveMinimum", true, true), 1);
  tighter(b.upper, bound("maximum", flag("exclusiveMaximum"), false), -1);
  tighter(b.upper, bound("exclusiveMaximum", true, true), -1);
  return b;
}

constexpr int64_t power_of_10(int n) { return n == 0 ? 1 : 10 * power_of_10(n - 1); }

Expr digit_range(char lo, char hi) {
  return Expr::chars({{static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)}});
}
Expr digits(int min, int max) {
  return max == 0 ? Expr::seq({}) : Expr::repeat(digit_range('0', '9'), min, max);
}

// Digit strings of x's length from x to y (x <= y as numbers, leading zeros allowed: the caller
// writes the first digit). Splits on the first digit: x's own digit then at least the rest of
// x, the digits between then anything, y's own digit then at most the rest of y.
Expr same_length(const std::string& x, const std::string& y) {
  if (x.empty()) return Expr::seq({});
  const int rest = static_cast<int>(x.size()) - 1;
  if (x[0] == y[0]) return Expr::seq({ch(x[0]), same_length(x.substr(1), y.substr(1))});
  const bool x_lowest = x.find_first_not_of('0', 1) == std::string::npos;
  const bool y_highest = y.find_first_not_of('9', 1) == std::string::npos;
  std::vector<Expr> alts;
  const char from = x_lowest ? x[0] : static_cast<char>(x[0] + 1);
  const char to = y_highest ? y[0] : static_cast<char>(y[0] - 1);
  if (!x_lowest)
    alts.push_back(Expr::seq({ch(x[0]), same_length(x.substr(1), std::string(rest, '9'))}));
  if (from <= to) alts.push_back(Expr::seq({digit_range(from, to), digits(rest, rest)}));
  if (!y_highest)
    alts.push_back(Expr::seq({ch(y[0]), same_length(std::string(rest, '0'), y.substr(1))}));
  return Expr::alt(std::move(alts));
}

// The integers from a to b (0 <= a, b < 10^16) without leading zeros, one piece per digit count
// (the count sizes the fraction a number may add).
std::vector<std::pair<int, Expr>> whole_pieces(int64_t a, int64_t b) {
  std::vector<std::pair<int, Expr>> out;
  if (a > b) return out;
  if (a == 0) {
    out.emplace_back(1, ch('0'));
    a = 1;
  }
  for (int n = 1; n <= kIntegerDigits && a <= b; ++n) {
    if (a >= power_of_10(n)) continue;
    const int64_t hi = std::min(b, power_of_10(n) - 1);
    out.emplace_back(n, same_length(std::to_string(a), std::to_string(hi)));
    a = hi + 1;
  }
  return out;
}

// A bound on the fraction, where the whole part equals the bound's.
struct FractionBound {
  const std::string& digits;
  bool strict;
  char digit(size_t i) const { return i < digits.size() ? digits[i] : '0'; }
};

// Fraction digits (at most `budget` more, at least one when `need_digit`) after i digits that
// equal the first i of each bound given (a null bound is no longer binding).
std::optional<Expr> fraction_digits(const FractionBound* lo, const FractionBound* hi, size_t i,
                                    int budget, bool need_digit) {
  const int need = need_digit ? 1 : 0;
  if (lo == nullptr && hi == nullptr)
    return budget >= need ? std::optional<Expr>(digits(need, budget)) : std::nullopt;
  std::vector<Expr> alts;
  // Stopping here leaves the bound's first i digits: equal to it when its digits end here.
  const bool lo_ok = lo == nullptr || (i >= lo->digits.size() && !lo->strict);
  const bool hi_ok = hi == nullptr || i < hi->digits.size() || !hi->strict;
  if (!need_digit && lo_ok && hi_ok) alts.push_back(Expr::seq({}));
  const char a = lo ? lo->digit(i) : '0', b = hi ? hi->digit(i) : '9';
  auto then = [&](char d, const FractionBound* l, const FractionBound* h) {
    if (auto rest = fraction_digits(l, h, i + 1, budget - 1, false))
      alts.push_back(Expr::seq({ch(d), std::move(*rest)}));
  };
  if (budget > 0 && a <= b) {
    if (lo && hi && a == b) {
      then(a, lo, hi);
    } else {
      if (lo) then(a, lo, nullptr);
      const char from = lo ? static_cast<char>(a + 1) : a, to = hi ? static_cast<char>(b - 1) : b;
      if (from <= to) alts.push_back(Expr::seq({digit_range(from, to), digits(0, budget - 1)}));
      if (hi) then(b, nullptr, hi);
    }
  }
  if (alts.empty()) return std::nullopt;
  return Expr::alt(std::move(alts));
}

// Nothing, or '.' and fraction digits.
std::optional<Expr> fraction_part(const FractionBound* lo, const FractionBound* hi, int budget) {
  std::vector<Expr> alts;
  if (fraction_digits(lo, hi, 0, 0, false)) alts.push_back(Expr::seq({}));
  if (budget > 0)
    if (auto d = fraction_digits(lo, hi, 0, budget, true))
      alts.push_back(Expr::seq({ch('.'), std::move(*d)}));
  if (alts.empty()) return std::nullopt;
  return Expr::alt(std::move(alts));
}

// Magnitudes (no sign) within [lower, upper]; upper absent: as many digits as may be written.
std::optional<Expr> magnitudes(const Bound& lower, const std::optional<Bound>& upper,
                               bool integer) {
  const size_t max_whole = integer ? kIntegerDigits : kBoundedNumberDigits;
  if (lower.value.whole.size() > max_whole) return std::nullopt;
  // An upper bound past the digits the grammar writes binds nothing.
  const bool capped = upper && upper->value.whole.size() <= max_whole;
  const int64_t low = std::stoll(lower.value.whole);
  const int64_t top =
      capped ? std::stoll(upper->value.whole) : power_of_10(static_cast<int>(max_whole)) - 1;
  if (low > top) return std::nullopt;
  const FractionBound lo{lower.value.fraction, lower.strict};
  const std::optional<FractionBound> hi =
      capped ? std::optional<FractionBound>(FractionBound{upper->value.fraction, upper->strict})
             : std::nullopt;
  std::vector<Expr> alts;
  auto add = [&](Expr whole, int n, const FractionBound* l, const FractionBound* h) {
    if (auto f = fraction_part(l, h, integer ? 0 : kBoundedNumberDigits - n))
      alts.push_back(Expr::seq({std::move(whole), std::move(*f)}));
  };
  const std::string low_text = std::to_string(low), top_text = std::to_string(top);
  if (capped && low == top) {
    add(Expr::lit(low_text), static_cast<int>(low_text.size()), &lo, &*hi);
  } else {
    add(Expr::lit(low_text), static_cast<int>(low_text.size()), &lo, nullptr);
    for (auto& [n, e] : whole_pieces(low + 1, capped ? top - 1 : top))
      add(std::move(e), n, nullptr, nullptr);
    if (capped) add(Expr::lit(top_text), static_cast<int>(top_text.size()), nullptr, &*hi);
  }
  if (alts.empty()) return std::nullopt;
  return Expr::alt(std::move(alts));
}

std::optional<Expr> signed_range(const Bounds& b, bool integer) {
  std::vector<Expr> alts;
  if (!b.lower || b.lower->value.negative) {
    // Negative values by magnitude: the bounds swap sides. Magnitude 0 would be "-0".
    Bound low{Decimal{}, true, ""};
    if (b.upper && b.upper->value.negative) low = negated(*b.upper);
    std::optional<Bound> high;
    if (b.lower) high = negated(*b.lower);
    if (auto m = magnitudes(low, high, integer))
      alts.push_back(Expr::seq({ch('-'), std::move(*m)}));
  }
  if (!b.upper || !b.upper->value.negative) {
    const Bound low = b.lower && !b.lower->value.negative ? *b.lower : Bound{Decimal{}, false, ""};
    if (auto m = magnitudes(low, b.upper, integer)) alts.push_back(std::move(*m));
  }
  if (alts.empty()) return std::nullopt;
  return Expr::alt(std::move(alts));
}

}  // namespace

bool has_numeric_bounds(const json& schema) {
  for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
    if (schema.contains(key)) return true;
  return false;
}

Expr bounded_number_expr(const json& schema, bool integer, const std::string& path) {
  const Bounds b = read_bounds(schema, path);
  if (auto e = signed_range(b, integer)) return std::move(*e);
  std::string bounds;
  for (const auto& x : {b.lower, b.upper})
    if (x) bounds += (bounds.empty() ? "" : " and ") + x->text;
  fail(std::string("no ") + (integer ? "integer" : "number") + " lies within " + bounds +
           (integer ? " (integers have at most " + std::to_string(kIntegerDigits) + " digits)"
                    : " (bounded numbers have at most " + std::to_string(kBoundedNumberDigits) +
                          " digits and no exponent)"),
       path);
}

bool within_numeric_bounds(const json& value, const json& schema, const std::string& path) {
  const Bounds b = read_bounds(schema, path);
  const Decimal v = decimal_of(value);
  if (b.lower) {
    const int c = compare(v, b.lower->value);
    if (c < 0 || (c == 0 && b.lower->strict)) return false;
  }
  if (b.upper) {
    const int c = compare(v, b.upper->value);
    if (c > 0 || (c == 0 && b.upper->strict)) return false;
  }
  return true;
}

}  // namespace tern::structured
