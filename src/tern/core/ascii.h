// ASCII case folding for names that are ASCII by definition (HTTP headers, file names,
// quantization labels); text in general goes through utf8.h.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>

namespace tern {

inline std::string ascii_lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace tern
