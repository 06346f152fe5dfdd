// A recursive-descent GBNF parser. Newlines are ordinary spacing; a sequence ends where an
// identifier followed by `::=` begins, so rules need no line discipline of their own.
#include "tern/structured/gbnf.h"

#include <cctype>

#include "tern/core/error.h"
#include "tern/core/utf8.h"

namespace tern::structured {

uint32_t decode_code_point(std::string_view text, size_t& pos, const char* what) {
  const Utf8Char c = next_utf8_char(text, pos);
  if (c.status != Utf8Status::Complete) throw Error(std::string(what) + ": invalid UTF-8");
  const auto b = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<unsigned char>(text[pos + i]));
  };
  uint32_t cp = 0;
  switch (c.length) {
    case 1:
      cp = b(0);
      break;
    case 2:
      cp = ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
      break;
    case 3:
      cp = ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
      break;
    default:
      cp = ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
  pos += c.length;
  return cp;
}

std::string encode_code_point(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

namespace {

constexpr int kMaxGbnfNesting = 200;

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Grammar run() {
    skip_space();
    while (pos_ < s_.size()) {
      const std::string name = identifier();
      if (name.empty()) fail("expected a rule name");
      skip_space();
      if (s_.substr(pos_, 3) != "::=") fail("expected '::=' after '" + name + "'");
      pos_ += 3;
      const int32_t r = g_.rule(name);
      if (g_.defined(r)) fail("rule '" + name + "' is defined twice");
      g_.define(r, alternatives(0));
      skip_space();
    }
    for (int32_t r = 0; r < g_.num_rules(); ++r)
      if (!g_.defined(r)) throw Error("grammar: rule '" + g_.name(r) + "' is used but not defined");
    for (int32_t r = 0; r < g_.num_rules(); ++r)
      if (g_.name(r) == "root") g_.root = r;
    if (g_.root < 0) throw Error("grammar: no 'root' rule");
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error("grammar: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " +
                what);
  }

  void skip_space() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string identifier() {
    const size_t start = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  // Is an identifier followed by `::=` at pos_ (the start of the next rule)?
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < s_.size() && is_name_char(s_[p])) ++p;
    if (p == pos_) return false;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n' || s_[p] == '\r')) ++p;
    return s_.substr(p, 3) == "::=";
  }

  Expr alternatives(int depth) {
    if (depth > kMaxGbnfNesting) fail("groups nested too deeply");
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
    for (;;) {
      skip_space();
      if (pos_ >= s_.size()) break;
      const char c = s_[pos_];
      if (c == '|' || c == ')' || at_rule_start()) break;
      Expr item = primary(depth);
      postfix(item);
      items.push_back(std::move(item));
    }
    if (items.empty()) return Expr::seq({});
    return Expr::seq(std::move(items));
  }

  void postfix(Expr& item) {
    for (;;) {
      skip_space_inline();
      if (pos_ >= s_.size()) return;
      const char c = s_[pos_];
      if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        item = Expr::repeat(std::move(item), c == '+' ? 1 : 0, c == '?' ? 1 : -1);
      } else if (c == '{') {
        ++pos_;
        const int32_t m = number();
        int32_t n = m;
        skip_space_inline();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          skip_space_inline();
          n = pos_ < s_.size() && s_[pos_] == '}' ? -1 : number();
        }
        skip_space_inline();
        if (pos_ >= s_.size() || s_[pos_] != '}') fail("expected '}' after a repetition count");
        ++pos_;
        if (n >= 0 && n < m) fail("repetition {m,n} has n < m");
        item = Expr::repeat(std::move(item), m, n);
      } else {
        return;
      }
    }
  }

  void skip_space_inline() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }

  int32_t number() {
    skip_space_inline();
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      v = v * 10 + (s_[pos_++] - '0');
      if (v > 1000000) fail("repetition count too large");
    }
    if (pos_ == start) fail("expected a number");
    return static_cast<int32_t>(v);
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_])))
        fail("expected " + std::to_string(digits) + " hex digits");
      const char c = s_[pos_++];
      v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c))
                                             ? c - '0'
                                             : (std::tolower(c) - 'a' + 10));
    }
    if (v > 0x10FFFF) fail("code point above U+10FFFF");
    return v;
  }

  // One character of a literal or class, escapes decoded.
  uint32_t character() {
    if (pos_ >= s_.size()) fail("unexpected end of the grammar");
    if (s_[pos_] != '\\') return decode_code_point(s_, pos_, "grammar");
    ++pos_;
    if (pos_ >= s_.size()) fail("unexpected end after '\\'");
    const char e = s_[pos_++];
    switch (e) {
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case '\\':
        return '\\';
      case '"':
        return '"';
      case '\'':
        return '\'';
      case '[':
        return '[';
      case ']':
        return ']';
      case '-':
        return '-';
      case '^':
        return '^';
      case '/':
        return '/';
      case 'x':
        return hex(2);
      case 'u':
        return hex(4);
      case 'U':
        return hex(8);
      default:
        --pos_;
        fail(std::string("unknown escape '\\") + e + "'");
    }
  }

  Expr primary(int depth) {
    const char c = s_[pos_];
    if (c == '"') {
      ++pos_;
      std::string lit;
      while (pos_ < s_.size() && s_[pos_] != '"') lit += encode_code_point(character());
      if (pos_ >= s_.size()) fail("unterminated string literal");
      ++pos_;
      return Expr::lit(std::move(lit));
    }
    if (c == '[') {
      ++pos_;
      bool negated = false;
      if (pos_ < s_.size() && s_[pos_] == '^') {
        negated = true;
        ++pos_;
      }
      std::vector<std::pair<uint32_t, uint32_t>> ranges;
      while (pos_ < s_.size() && s_[pos_] != ']') {
        const uint32_t lo = character();
        uint32_t hi = lo;
        if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
          ++pos_;
          hi = character();
          if (hi < lo) fail("character range is reversed");
        }
        ranges.emplace_back(lo, hi);
      }
      if (pos_ >= s_.size()) fail("unterminated character class");
      ++pos_;
      return Expr::chars(std::move(ranges), negated);
    }
    if (c == '(') {
      ++pos_;
      Expr inner = alternatives(depth + 1);
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ')') fail("expected ')'");
      ++pos_;
      return inner;
    }
    if (c == '.') {
      ++pos_;
      return Expr::chars({}, true);  // any character
    }
    if (is_name_char(c)) return Expr::ref(g_.rule(identifier()));
    fail(std::string("unexpected '") + c + "'");
  }

  std::string_view s_;
  size_t pos_ = 0;
  Grammar g_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) { return Parser(text).run(); }

}  // namespace tern::structured
