// Helpers shared by the GGUF reader and writer; not part of the public API.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tern/formats/gguf.h"

namespace tern::gguf_detail {

// Tensor data alignment when general.alignment is not set.
constexpr uint64_t kDefaultAlignment = 32;

// True for the value type ids this reader knows (0..12).
inline bool is_known_type(uint32_t type) {
  return type <= static_cast<uint32_t>(GgufType::FLOAT64);
}

// Bytes of one scalar of `type` in the file, 0 for STRING and ARRAY.
uint32_t scalar_size(GgufType type);

// The fewest bytes one element of `type` can take in the file (a string's length field, an
// array's type and count), so that a count can be checked against the bytes left before
// anything is allocated.
uint32_t min_encoded_size(GgufType type);

// `s` in double quotes, with quotes, backslashes, control characters and bytes that are not
// valid UTF-8 escaped, so that it is safe in an error message or a terminal.
std::string quoted(std::string_view s);

}  // namespace tern::gguf_detail
