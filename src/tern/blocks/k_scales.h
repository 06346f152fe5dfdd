// The 6-bit scales and mins of Q4_K / Q5_K, 8 of each packed in 12 bytes (ggml's layout):
// bytes 0-3 hold scales 0-3 in their low 6 bits, bytes 4-7 mins 0-3; bytes 8-11 hold the low
// nibbles of scales 4-7 (low half) and mins 4-7 (high half), whose top 2 bits sit in the top
// 2 bits of bytes 0-3 (scales) and 4-7 (mins).
#pragma once

#include <cstdint>

#include "tern/blocks/block_layouts.h"

namespace tern {

// j: sub-block 0..7.
inline void unpack_k_scale_min(const uint8_t* q, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// scales, mins: [8] values in 0..63.
inline void pack_k_scales_mins(const int* scales, const int* mins, uint8_t* q) {
  for (int j = 0; j < kKScaleBytes; ++j) q[j] = 0;
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] = static_cast<uint8_t>(scales[j]);
      q[j + 4] = static_cast<uint8_t>(mins[j]);
    } else {
      q[j + 4] = static_cast<uint8_t>((scales[j] & 0xf) | (mins[j] & 0xf) << 4);
      q[j - 4] |= static_cast<uint8_t>((scales[j] >> 4) << 6);
      q[j] |= static_cast<uint8_t>((mins[j] >> 4) << 6);
    }
  }
}

}  // namespace tern
