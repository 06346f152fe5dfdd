// Jinja's lexer, rebuilt from its documented behaviour: text runs up to "{{", "{%" or "{#";
// inside a tag, Python-like tokens until the closing delimiter at bracket depth zero.
#include "tern/jinja/lexer.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tern/jinja/fault.h"
#include "tern/jinja/text.h"

namespace tern::jinja {
namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

[[noreturn]] void lex_fail(int line, const std::string& what) {
  fail("line " + std::to_string(line) + ": " + what);
}

std::string normalize_newlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python string-literal escapes, as Jinja decodes them ("unicode-escape"); an unknown escape
// keeps its backslash.
std::string decode_string(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    auto hex = [&](size_t digits) {
      char32_t cp = 0;
      for (size_t k = 1; k <= digits; ++k) {
        if (i + k >= body.size()) lex_fail(line, "truncated \\x/\\u escape in a string");
        const char h = body[i + k];
        int d = is_digit(h)              ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0) lex_fail(line, "bad hex digit in a \\x/\\u escape in a string");
        cp = cp * 16 + static_cast<char32_t>(d);
      }
      i += digits;
      if (cp > 0x10FFFF) lex_fail(line, "escape names a code point past U+10FFFF");
      append_utf8(cp, out);
    };
    switch (c) {
      case '\n':
        break;  // line continuation
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
        hex(2);
        break;
      case 'u':
        hex(4);
        break;
      case 'U':
        hex(8);
        break;
      case 'N':
        lex_fail(line, "\\N{...} escapes in strings are not supported");
      default:
        if (c >= '0' && c <= '7') {
          char32_t cp = 0;
          size_t k = 0;
          while (k < 3 && i < body.size() && body[i] >= '0' && body[i] <= '7') {
            cp = cp * 8 + static_cast<char32_t>(body[i] - '0');
            ++i;
            ++k;
          }
          --i;
          append_utf8(cp, out);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options)
      : src_(normalize_newlines(source, options.keep_trailing_newline)), options_(options) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t p = pos_;
      while (true) {
        p = src_.find('{', p);
        if (p == std::string::npos || p + 1 >= src_.size()) {
          p = std::string::npos;
          break;
        }
        const char k = src_[p + 1];
        if (k == '{' || k == '%' || k == '#') break;
        ++p;
      }
      if (p == std::string::npos) {
        emit_text(src_.substr(pos_));
        break;
      }
      const char kind = src_[p + 1];
      const char sign =
          p + 2 < src_.size() && (src_[p + 2] == '-' || src_[p + 2] == '+') ? src_[p + 2] : 0;
      std::string text = src_.substr(pos_, p - pos_);
      if (sign == '-') {
        text = py_strip(text, nullptr, false, true);
      } else if (sign != '+' && options_.lstrip_blocks && kind != '{') {
        text = lstrip_before_tag(text);
      }
      emit_text_counting(text, src_.substr(pos_, p - pos_));
      pos_ = p + 2 + (sign ? 1 : 0);
      if (kind == '#')
        comment();
      else
        tag(kind);
    }
    tokens_.push_back({TokenKind::End, "", {}, line_});
    return std::move(tokens_);
  }

 private:
  std::string lstrip_before_tag(const std::string& text) const {
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting_) return text;
    for (size_t i = l_pos; i < text.size(); ++i)
      if (text[i] != ' ' && text[i] != '\t') return text;
    return text.substr(0, l_pos);
  }

  void emit_text(const std::string& text) { emit_text_counting(text, text); }

  // `consumed` is the source the text came from (whitespace control may have shortened it).
  void emit_text_counting(const std::string& text, std::string_view consumed) {
    if (!text.empty()) tokens_.push_back({TokenKind::Text, text, {}, line_});
    count_lines(consumed);
  }

  void count_lines(std::string_view s) {
    for (char c : s)
      if (c == '\n') ++line_;
  }

  // After a closing delimiter: `-` strips all whitespace, trim_blocks one newline after a
  // block or comment (unless `+`).
  void after_tag_end(char sign, bool is_block_or_comment) {
    const size_t start = pos_;
    if (sign == '-') {
      while (pos_ < src_.size()) {
        size_t next = pos_;
        if (!py_isspace(decode_utf8(src_, next))) break;
        pos_ = next;
      }
    } else if (sign != '+' && is_block_or_comment && options_.trim_blocks && pos_ < src_.size() &&
               src_[pos_] == '\n') {
      ++pos_;
    }
    const std::string_view eaten(src_.data() + start, pos_ - start);
    count_lines(eaten);
    line_starting_ = eaten.empty() ? false : eaten.back() == '\n';
  }

  void comment() {
    const int start_line = line_;
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) lex_fail(start_line, "comment {# is never closed with #}");
    char sign = 0;
    if (end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+')) sign = src_[end - 1];
    count_lines(std::string_view(src_).substr(pos_, end + 2 - pos_));
    pos_ = end + 2;
    after_tag_end(sign, true);
  }

  bool at(const char* s) const { return src_.compare(pos_, std::strlen(s), s) == 0; }

  void tag(char kind) {
    const int start_line = line_;
    const bool block = kind == '%';
    if (block && raw_block()) return;
    tokens_.push_back({block ? TokenKind::BlockBegin : TokenKind::VariableBegin, "", {}, line_});
    int depth = 0;
    const char* close = block ? "%}" : "}}";
    while (true) {
      while (pos_ < src_.size() && (src_[pos_] == ' ' || src_[pos_] == '\t' || src_[pos_] == '\n' ||
                                    src_[pos_] == '\r')) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size())
        lex_fail(start_line, std::string(block ? "block tag {%" : "variable tag {{") +
                                 " is never closed with " + close);
      if (depth == 0) {
        char sign = 0;
        if ((src_[pos_] == '-' || (block && src_[pos_] == '+')) &&
            src_.compare(pos_ + 1, 2, close) == 0)
          sign = src_[pos_];
        if (sign || at(close)) {
          pos_ += sign ? 3 : 2;
          tokens_.push_back({block ? TokenKind::BlockEnd : TokenKind::VariableEnd, "", {}, line_});
          after_tag_end(sign, block);
          return;
        }
      }
      const char c = src_[pos_];
      if (is_name_start(c)) {
        const size_t b = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        tokens_.push_back({TokenKind::Name, src_.substr(b, pos_ - b), {}, line_});
      } else if (is_digit(c)) {
        number();
      } else if (c == '\'' || c == '"') {
        string_literal(c);
      } else {
        static const char* const kOperators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                                 "/",  "%",  "~",  "|",  ".",  ",",  ":", "(", ")",
                                                 "[",  "]",  "{",  "}",  "<",  ">",  "=", ";"};
        const char* match = nullptr;
        for (const char* op : kOperators)
          if (at(op)) {
            match = op;
            break;
          }
        if (!match) lex_fail(line_, std::string("unexpected character '") + c + "' in a tag");
        const std::string op(match);
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") {
          if (depth == 0) lex_fail(line_, "unexpected '" + op + "' in a tag");
          --depth;
        }
        pos_ += op.size();
        tokens_.push_back({TokenKind::Operator, op, {}, line_});
      }
    }
  }

  void number() {
    const size_t b = pos_;
    auto digits = [&] {
      while (pos_ < src_.size() &&
             (is_digit(src_[pos_]) ||
              (src_[pos_] == '_' && pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1]))))
        ++pos_;
    };
    digits();
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      ++pos_;
      digits();
      is_float = true;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t q = pos_ + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && is_digit(src_[q])) {
        pos_ = q;
        digits();
        is_float = true;
      }
    }
    std::string spelled;
    for (size_t i = b; i < pos_; ++i)
      if (src_[i] != '_') spelled += src_[i];
    Token t{is_float ? TokenKind::Float : TokenKind::Integer, spelled, {}, line_};
    if (is_float) {
      t.number = Value(std::strtod(spelled.c_str(), nullptr));
    } else {
      errno = 0;
      const long long v = std::strtoll(spelled.c_str(), nullptr, 10);
      if (errno == ERANGE)
        lex_fail(line_, "integer literal " + spelled + " does not fit in 64 bits");
      t.number = Value(static_cast<int64_t>(v));
    }
    tokens_.push_back(std::move(t));
  }

  void string_literal(char quote) {
    const int start_line = line_;
    size_t i = pos_ + 1;
    while (i < src_.size() && src_[i] != quote) {
      if (src_[i] == '\\') ++i;
      ++i;
    }
    if (i >= src_.size()) lex_fail(start_line, "string literal is never closed");
    const std::string_view body(src_.data() + pos_ + 1, i - pos_ - 1);
    tokens_.push_back({TokenKind::String, decode_string(body, start_line), {}, start_line});
    count_lines(body);
    pos_ = i + 1;
  }

  // {% raw %}...{% endraw %}: the text between is output as is. Returns false when the block
  // is not a raw block.
  bool raw_block() {
    size_t p = pos_;
    while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\n')) ++p;
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && is_name_char(src_[p + 3])))
      return false;
    p += 3;
    while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\n')) ++p;
    char open_sign = 0;
    if (p < src_.size() && src_[p] == '-') open_sign = src_[p++];
    if (src_.compare(p, 2, "%}") != 0) return false;
    const int start_line = line_;
    count_lines(std::string_view(src_).substr(pos_, p + 2 - pos_));
    pos_ = p + 2;
    if (open_sign == '-')
      while (pos_ < src_.size() && py_isspace(static_cast<unsigned char>(src_[pos_]))) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
    // Find "{%" [-+] ws "endraw" ws [-+] "%}".
    for (size_t q = src_.find("{%", pos_); q != std::string::npos; q = src_.find("{%", q + 2)) {
      size_t r = q + 2;
      char sign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) sign = src_[r++];
      while (r < src_.size() && (src_[r] == ' ' || src_[r] == '\t' || src_[r] == '\n')) ++r;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < src_.size() && (src_[r] == ' ' || src_[r] == '\t' || src_[r] == '\n')) ++r;
      char end_sign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) end_sign = src_[r++];
      if (src_.compare(r, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos_, q - pos_);
      if (sign == '-')
        text = py_strip(text, nullptr, false, true);
      else if (sign != '+' && options_.lstrip_blocks) {
        line_starting_ = false;
        text = lstrip_before_tag(text);
      }
      emit_text_counting(text, std::string_view(src_).substr(pos_, r + 2 - pos_));
      pos_ = r + 2;
      after_tag_end(end_sign, true);
      return true;
    }
    lex_fail(start_line, "{% raw %} is never closed with {% endraw %}");
  }

  std::string src_;
  LexerOptions options_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace tern::jinja
