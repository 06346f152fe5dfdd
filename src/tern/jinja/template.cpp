// Parses once, renders with a fresh Renderer per call, and turns internal faults into
// tern::Error messages that name the template and the line.
#include "tern/jinja/template.h"

#include "tern/core/error.h"
#include "tern/jinja/fault.h"
#include "tern/jinja/parser.h"

namespace tern::jinja {

struct ParsedTemplate {
  Body statements;
};

Template::Template(std::string_view source, TemplateOptions options)
    : options_(std::move(options)) {
  try {
    auto body = std::make_shared<ParsedTemplate>();
    body->statements = parse_template(source, options_.lexer);
    body_ = std::move(body);
  } catch (const Fault& fault) {
    throw Error(options_.name + ": " + fault.what());
  }
}

std::string Template::render(const Object& context) const {
  Renderer renderer(options_.limits, context);
  try {
    return renderer.render(body_->statements);
  } catch (const Fault& fault) {
    throw Error(options_.name + ": line " + std::to_string(renderer.line()) + ": " + fault.what());
  }
}

}  // namespace tern::jinja
