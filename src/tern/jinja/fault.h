// The error the interpreter throws while it renders; Template::render adds the template name
// and the line being rendered and turns it into a tern::Error.
#pragma once

#include <stdexcept>
#include <string>

namespace tern::jinja {

class Fault : public std::runtime_error {
 public:
  explicit Fault(const std::string& message) : std::runtime_error(message) {}
};

[[noreturn]] inline void fail(const std::string& message) { throw Fault(message); }

}  // namespace tern::jinja
