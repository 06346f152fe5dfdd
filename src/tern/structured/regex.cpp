// A recursive-descent regex parser producing grammar expressions directly (no NFA of its own:
// the matcher runs the grammar).
#include "tern/structured/regex.h"

#include <algorithm>
#include <cctype>

#include "tern/core/error.h"
#include "tern/structured/gbnf.h"

namespace tern::structured {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

constexpr int kMaxRegexNesting = 200;

Ranges digit() { return {{'0', '9'}}; }
Ranges word() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
Ranges space() { return {{'\t', '\r'}, {' ', ' '}}; }

Ranges complement(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = std::max(next, hi + 1);
  }
  if (next <= 0x10FFFF) out.emplace_back(next, 0x10FFFF);
  return out;
}

// r minus the characters a JSON string must escape.
Ranges json_safe(const Ranges& r) {
  Ranges out;
  for (auto [lo, hi] : r) {
    lo = std::max<uint32_t>(lo, 0x20);
    for (uint32_t bad : {uint32_t{'"'}, uint32_t{'\\'}}) {
      if (lo <= bad && bad <= hi) {
        if (lo < bad) out.emplace_back(lo, bad - 1);
        lo = bad + 1;
      }
    }
    if (lo <= hi) out.emplace_back(lo, hi);
  }
  return out;
}

class RegexParser {
 public:
  RegexParser(std::string_view s, const RegexOptions& o) : s_(s), o_(o) {}

  Expr run() {
    if (!s_.empty() && s_[0] == '^') ++pos_;
    Expr e = alternatives(0);
    if (pos_ < s_.size()) fail(s_[pos_] == ')' ? "unbalanced ')'" : "unexpected character");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("regex: " + what + " at offset " + std::to_string(pos_) + " of '" +
                std::string(s_.substr(0, 200)) + "'");
  }

  Expr chars(Ranges r, bool negated = false) {
    if (negated) r = complement(std::move(r));
    if (o_.json_string) r = json_safe(r);
    return Expr::chars(std::move(r));
  }

  Expr literal(uint32_t c) {
    if (o_.json_string && (c == '"' || c == '\\'))
      return Expr::lit(std::string("\\") + static_cast<char>(c));
    if (o_.json_string && c < 0x20) {
      static const char* kHex = "0123456789abcdef";
      return Expr::lit(std::string("\\u00") + kHex[c >> 4] + kHex[c & 15]);
    }
    return Expr::lit(encode_code_point(c));
  }

  Expr alternatives(int depth) {
    if (depth > kMaxRegexNesting) fail("groups nested too deeply");
    std::vector<Expr> alts;
    alts.push_back(sequence(depth));
    while (pos_ < s_.size() && s_[pos_] == '|') {
      ++pos_;
      alts.push_back(sequence(depth));
    }
    return Expr::alt(std::move(alts));
  }

  Expr sequence(int depth) {
    std::vector<Expr> items;
    while (pos_ < s_.size() && s_[pos_] != '|' && s_[pos_] != ')') {
      if (s_[pos_] == '$' && pos_ + 1 == s_.size()) {
        ++pos_;
        break;
      }
      Expr item = atom(depth);
      quantifiers(item);
      items.push_back(std::move(item));
    }
    return Expr::seq(std::move(items));
  }

  int32_t number() {
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      v = v * 10 + (s_[pos_++] - '0');
      if (v > 100000) fail("repetition count too large");
    }
    if (pos_ == start) fail("expected a number in {m,n}");
    return static_cast<int32_t>(v);
  }

  void quantifiers(Expr& item) {
    bool quantified = false;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      int32_t m = 0, n = -1;
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        m = 1;
        ++pos_;
      } else if (c == '?') {
        n = 1;
        ++pos_;
      } else if (c == '{' && pos_ + 1 < s_.size() &&
                 std::isdigit(static_cast<unsigned char>(s_[pos_ + 1]))) {
        ++pos_;
        m = n = number();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          n = pos_ < s_.size() && s_[pos_] == '}' ? -1 : number();
        }
        if (pos_ >= s_.size() || s_[pos_] != '}') fail("expected '}'");
        ++pos_;
        if (n >= 0 && n < m) fail("{m,n} with n < m");
      } else {
        return;
      }
      if (quantified) fail("nested quantifier");
      quantified = true;
      item = Expr::repeat(std::move(item), m, n);
      // Lazy: the same whole-string language. Possessive changes it: refused.
      if (pos_ < s_.size() && s_[pos_] == '?')
        ++pos_;
      else if (pos_ < s_.size() && s_[pos_] == '+')
        fail("possessive quantifiers are not supported");
    }
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_])))
        fail("bad hex escape");
      const char c = s_[pos_++];
      v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c))
                                             ? c - '0'
                                             : std::tolower(c) - 'a' + 10);
    }
    return v;
  }

  // After a '\': a class escape fills `cls` and returns true, a character escape sets `ch`.
  bool escape(Ranges& cls, uint32_t& ch) {
    if (pos_ >= s_.size()) fail("trailing '\\'");
    const char e = s_[pos_++];
    switch (e) {
      case 'd':
        cls = digit();
        return true;
      case 'D':
        cls = complement(digit());
        return true;
      case 'w':
        cls = word();
        return true;
      case 'W':
        cls = complement(word());
        return true;
      case 's':
        cls = space();
        return true;
      case 'S':
        cls = complement(space());
        return true;
      case 'n':
        ch = '\n';
        return false;
      case 't':
        ch = '\t';
        return false;
      case 'r':
        ch = '\r';
        return false;
      case 'f':
        ch = '\f';
        return false;
      case 'v':
        ch = '\v';
        return false;
      case 'x':
        ch = hex(2);
        return false;
      case 'u':
        ch = hex(4);
        return false;
      case 'b':
      case 'B':
        fail("word boundaries (\\b, \\B) are not supported");
      case 'A':
      case 'Z':
      case 'z':
        fail("anchors inside a pattern are not supported");
      case 'p':
      case 'P':
        fail("Unicode property classes (\\p) are not supported");
      default:
        if (std::isdigit(static_cast<unsigned char>(e))) fail("backreferences are not supported");
        if (std::isalnum(static_cast<unsigned char>(e)))
          fail(std::string("unknown escape '\\") + e + "'");
        ch = static_cast<unsigned char>(e);
        return false;
    }
  }

  Expr atom(int depth) {
    const char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      if (pos_ < s_.size() && s_[pos_] == '?') {
        if (pos_ + 1 < s_.size() && s_[pos_ + 1] == ':') {
          pos_ += 2;
        } else {
          fail("lookaround and named or flagged groups are not supported");
        }
      }
      Expr e = alternatives(depth + 1);
      if (pos_ >= s_.size() || s_[pos_] != ')') fail("expected ')'");
      ++pos_;
      return e;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++pos_;
      return chars({{'\n', '\n'}}, true);
    }
    if (c == '\\') {
      ++pos_;
      Ranges cls;
      uint32_t ch = 0;
      if (escape(cls, ch)) return chars(std::move(cls));
      return literal(ch);
    }
    if (c == '*' || c == '+' || c == '?') fail("quantifier with nothing to repeat");
    if (c == '^') fail("'^' inside a pattern is not supported");
    if (c == '$') fail("'$' inside a pattern is not supported");
    return literal(decode_code_point(s_, pos_, "regex"));
  }

  Expr char_class() {
    ++pos_;  // '['
    bool negated = false;
    if (pos_ < s_.size() && s_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    Ranges r;
    bool first = true;
    while (pos_ < s_.size() && (s_[pos_] != ']' || first)) {
      first = false;
      uint32_t lo = 0;
      if (s_[pos_] == '\\') {
        ++pos_;
        Ranges cls;
        if (escape(cls, lo)) {
          r.insert(r.end(), cls.begin(), cls.end());
          continue;
        }
      } else if (s_[pos_] == '[' && pos_ + 1 < s_.size() && s_[pos_ + 1] == ':') {
        fail("POSIX classes ([:alpha:]) are not supported");
      } else {
        lo = decode_code_point(s_, pos_, "regex");
      }
      uint32_t hi = lo;
      if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        if (s_[pos_] == '\\') {
          ++pos_;
          Ranges cls;
          if (escape(cls, hi)) fail("a class escape cannot end a range");
        } else {
          hi = decode_code_point(s_, pos_, "regex");
        }
        if (hi < lo) fail("reversed range in a class");
      }
      r.emplace_back(lo, hi);
    }
    if (pos_ >= s_.size()) fail("unterminated '['");
    ++pos_;
    return chars(std::move(r), negated);
  }

  std::string_view s_;
  size_t pos_ = 0;
  const RegexOptions& o_;
};

}  // namespace

Expr regex_to_expr(std::string_view pattern, Grammar&, const RegexOptions& options) {
  return RegexParser(pattern, options).run();
}

Grammar compile_regex(std::string_view pattern) {
  Grammar g;
  const int32_t root = g.rule("root");
  g.define(root, regex_to_expr(pattern, g));
  g.root = root;
  return g;
}

}  // namespace tern::structured
