// The one exception type of tern: file, request and configuration problems, with a message
// that names the thing and what is wrong. Hot paths never throw.
#pragma once

#include <stdexcept>
#include <string>

namespace tern {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace tern
