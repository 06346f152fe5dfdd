// Streaming parsers hold back the end of the text that could still become a tag.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace tern::server {

// How many characters at the end of `s` could be the start of `tag` (and so are held back).
inline size_t partial_tag_length(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(s.size(), tag.size() - 1); k > 0; --k)
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

}  // namespace tern::server
