// Builds the syntax tree of a template from its tokens, with Jinja's operator precedence.
#pragma once

#include <string_view>

#include "tern/jinja/ast.h"
#include "tern/jinja/lexer.h"

namespace tern::jinja {

// Throws Fault("line N: ...") for syntax errors and for tags tern does not implement.
Body parse_template(std::string_view source, const LexerOptions& options = {});

}  // namespace tern::jinja
