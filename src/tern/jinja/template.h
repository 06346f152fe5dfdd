// The public face of tern's Jinja engine: parse a template once, render it many times (on any
// number of threads) with a context of values. Everything else in this folder is internal.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tern/jinja/interpreter.h"
#include "tern/jinja/lexer.h"
#include "tern/jinja/value.h"

namespace tern::jinja {

struct ParsedTemplate;  // the syntax tree, defined in template.cpp

struct TemplateOptions {
  std::string name = "template";  // starts every error message
  LexerOptions lexer;             // transformers' settings by default
  RenderLimits limits;
};

class Template {
 public:
  // Throws tern::Error("<name>: line N: ...") on a syntax error or an unsupported tag.
  explicit Template(std::string_view source, TemplateOptions options = {});

  // `context` holds the template's variables. Throws tern::Error("<name>: line N: ...") when
  // rendering fails (undefined value used, type error, raise_exception, limits).
  std::string render(const Object& context) const;

 private:
  std::shared_ptr<const ParsedTemplate> body_;
  TemplateOptions options_;
};

}  // namespace tern::jinja
