// Splits template source into text and tag tokens the way Jinja's lexer does with the settings
// transformers renders chat templates with: trim_blocks and lstrip_blocks on, `-` / `+`
// whitespace control on tags, newlines normalised and one trailing newline dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tern/jinja/value.h"

namespace tern::jinja {

enum class TokenKind {
  Text,
  VariableBegin,
  VariableEnd,
  BlockBegin,
  BlockEnd,
  Name,
  String,
  Integer,
  Float,
  Operator,
  End
};

struct Token {
  TokenKind kind;
  std::string text;  // Text: the text; Name/Operator: the spelling; String: the decoded value
  Value number;      // Integer / Float
  int line = 0;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws Fault("line N: ...") on unterminated tags, strings and comments.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options = {});

}  // namespace tern::jinja
