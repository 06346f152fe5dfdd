// Formats as grammar expressions written out by hand (they are small and exact), and JSON
// patterns through the regex front end; the patternProperties checks run the patterns'
// automata.
#include "tern/structured/json_schema_strings.h"

#include <set>
#include <utility>
#include <vector>

#include "tern/core/error.h"
#include "tern/structured/automaton.h"
#include "tern/structured/regex.h"

namespace tern::structured {
namespace {

// Pairs of states may_overlap explores before it gives up (and answers true).
constexpr size_t kMaxOverlapPairs = 4096;

Expr range(uint32_t lo, uint32_t hi) { return Expr::chars({{lo, hi}}); }
Expr digits(int n) { return Expr::repeat(range('0', '9'), n, n); }

// Two digits: any of the two-digit multiples of 4, 00 included or not.
Expr multiple_of_4(bool with_00) {
  return Expr::alt(
      {Expr::seq({ch('0'), with_00 ? Expr::chars({{'0', '0'}, {'4', '4'}, {'8', '8'}})
                                   : Expr::chars({{'4', '4'}, {'8', '8'}})}),
       Expr::seq({Expr::chars({{'2', '2'}, {'4', '4'}, {'6', '6'}, {'8', '8'}}),
                  Expr::chars({{'0', '0'}, {'4', '4'}, {'8', '8'}})}),
       Expr::seq({Expr::chars({{'1', '1'}, {'3', '3'}, {'5', '5'}, {'7', '7'}, {'9', '9'}}),
                  Expr::chars({{'2', '2'}, {'6', '6'}})})});
}

// RFC 3339 full-date: February 29th only in leap years (divisible by 4, and by 400 when by 100).
Expr full_date() {
  const Expr day28 =
      Expr::alt({Expr::seq({ch('0'), range('1', '9')}), Expr::seq({ch('1'), range('0', '9')}),
                 Expr::seq({ch('2'), range('0', '8')})});
  const Expr day30 = Expr::alt({day28, Expr::lit("29"), Expr::lit("30")});
  const Expr day31 = Expr::alt({day30, Expr::lit("31")});
  const Expr long_month = Expr::alt(
      {Expr::seq({ch('0'), Expr::chars({{'1', '1'}, {'3', '3'}, {'5', '5'}, {'7', '8'}})}),
       Expr::lit("10"), Expr::lit("12")});
  const Expr short_month = Expr::alt(
      {Expr::seq({ch('0'), Expr::chars({{'4', '4'}, {'6', '6'}, {'9', '9'}})}), Expr::lit("11")});
  const Expr month_day =
      Expr::alt({Expr::seq({long_month, ch('-'), day31}), Expr::seq({short_month, ch('-'), day30}),
                 Expr::seq({Expr::lit("02-"), day28})});
  const Expr leap_year = Expr::alt({Expr::seq({digits(2), multiple_of_4(false)}),
                                    Expr::seq({multiple_of_4(true), Expr::lit("00")})});
  return Expr::alt(
      {Expr::seq({digits(4), ch('-'), month_day}), Expr::seq({leap_year, Expr::lit("-02-29")})});
}

// RFC 3339 full-time (the offset is required); no leap second.
Expr full_time() {
  const Expr hour = Expr::alt(
      {Expr::seq({range('0', '1'), range('0', '9')}), Expr::seq({ch('2'), range('0', '3')})});
  const Expr minute = Expr::seq({range('0', '5'), range('0', '9')});
  const Expr offset =
      Expr::alt({Expr::chars({{'Z', 'Z'}, {'z', 'z'}}),
                 Expr::seq({Expr::chars({{'+', '+'}, {'-', '-'}}), hour, ch(':'), minute})});
  return Expr::seq({hour, ch(':'), minute, ch(':'), minute,
                    Expr::repeat(Expr::seq({ch('.'), Expr::repeat(range('0', '9'), 1, 9)}), 0, 1),
                    offset});
}

Expr ipv4() {
  const Expr d = range('0', '9');
  const Expr octet = Expr::alt({Expr::seq({ch('2'), ch('5'), range('0', '5')}),
                                Expr::seq({ch('2'), range('0', '4'), d}),
                                Expr::seq({ch('1'), d, d}), Expr::seq({range('1', '9'), d}), d});
  return Expr::seq({octet, ch('.'), octet, ch('.'), octet, ch('.'), octet});
}

// RFC 5321 Mailbox, a subset: a dot-atom local part (at most 30 + 2 × 17 = 64 characters) at
// two to four labels of at most 22 characters, or at an IPv4 literal. Bounded, so that even a
// model with no idea what an address is finishes one.
Expr email() {
  const Expr atext = Expr::chars({{'a', 'z'},
                                  {'A', 'Z'},
                                  {'0', '9'},
                                  {'!', '!'},
                                  {'#', '\''},
                                  {'*', '+'},
                                  {'-', '-'},
                                  {'/', '/'},
                                  {'=', '='},
                                  {'?', '?'},
                                  {'^', '`'},
                                  {'{', '~'}});
  const Expr local =
      Expr::seq({Expr::repeat(atext, 1, 30),
                 Expr::repeat(Expr::seq({ch('.'), Expr::repeat(atext, 1, 16)}), 0, 2)});
  const Expr alnum = Expr::chars({{'a', 'z'}, {'A', 'Z'}, {'0', '9'}});
  const Expr label = Expr::seq(
      {alnum,
       Expr::repeat(
           Expr::seq(
               {Expr::repeat(Expr::chars({{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {'-', '-'}}), 0, 20),
                alnum}),
           0, 1)});
  const Expr domain =
      Expr::alt({Expr::seq({label, Expr::repeat(Expr::seq({ch('.'), label}), 1, 3)}),
                 Expr::seq({ch('['), ipv4(), ch(']')})});
  return Expr::seq({local, ch('@'), domain});
}

// The pattern's top-level alternatives: each carries its own anchors ("^a|b$" is "^a" or "b$").
std::vector<std::string> alternatives(const std::string& p) {
  std::vector<std::string> out(1);
  int depth = 0;
  size_t class_start = std::string::npos;  // inside [...]: where its members begin
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      out.back() += p.substr(i++, 2);
      continue;
    }
    out.back() += c;
    if (class_start != std::string::npos) {
      // A ']' first in the class is a member, not its end.
      if (c == ']' && i > class_start) class_start = std::string::npos;
    } else if (c == '[') {
      class_start = i + 1 < p.size() && p[i + 1] == '^' ? i + 2 : i + 1;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '|' && depth == 0) {
      out.back().pop_back();
      out.emplace_back();
    }
  }
  return out;
}

// A JSON pattern (a search) as a whole-match regex: unanchored ends get `any` around them.
std::string whole_match(const std::string& pattern, const std::string& any) {
  std::string out;
  for (std::string p : alternatives(pattern)) {
    const bool start = !p.empty() && p[0] == '^';
    if (start) p = p.substr(1);
    const bool end = !p.empty() && p.back() == '$' && (p.size() < 2 || p[p.size() - 2] != '\\');
    if (end) p.pop_back();
    out += (out.empty() ? "" : "|") + (start ? "" : any) + "(?:" + p + ")" + (end ? "" : any);
  }
  return out;
}

}  // namespace

Expr format_expr(const std::string& f, const std::string& path) {
  if (f == "date") return full_date();
  if (f == "time") return full_time();
  if (f == "date-time")
    return Expr::seq({full_date(), Expr::chars({{'T', 'T'}, {'t', 't'}}), full_time()});
  if (f == "uuid") {
    const Expr h = Expr::chars({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
    auto hex = [&](int n) { return Expr::repeat(h, n, n); };
    return Expr::seq({hex(8), ch('-'), hex(4), ch('-'), hex(4), ch('-'), hex(4), ch('-'), hex(12)});
  }
  if (f == "email") return email();
  if (f == "ipv4") return ipv4();
  throw Error("unsupported JSON schema format '" + f + "' at " + (path.empty() ? "/" : path));
}

Expr pattern_expr(const std::string& pattern, Grammar& grammar) {
  return regex_to_expr(whole_match(pattern, ".*"), grammar, RegexOptions{true});
}

Automaton search_automaton(const std::string& pattern) {
  return Automaton(flatten(compile_regex(whole_match(pattern, "[\\s\\S]*"))));
}

bool may_overlap(Automaton& x, Automaton& y) {
  using Pair = std::pair<int32_t, int32_t>;
  std::set<Pair> seen{{x.start(), y.start()}};
  std::vector<Pair> todo{{x.start(), y.start()}};
  while (!todo.empty()) {
    const auto [s, t] = todo.back();
    todo.pop_back();
    if (x.accepting(s) && y.accepting(t)) return true;
    for (int c = 0; c < 256; ++c) {
      const Pair next{x.next(s, static_cast<uint8_t>(c)), y.next(t, static_cast<uint8_t>(c))};
      if (next.first == Automaton::kDead || next.second == Automaton::kDead) continue;
      if (!seen.insert(next).second) continue;
      if (seen.size() > kMaxOverlapPairs) return true;
      todo.push_back(next);
    }
  }
  return false;
}

}  // namespace tern::structured
