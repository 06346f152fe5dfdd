// A GEMM tile driver for the ARM kernels whose micro-kernel takes one weight row against a group
// of kGroupTokens tokens (vec_dot_k2_k3_neon.h, vec_dot_iq4_neon.h): the micro-kernel decodes each
// weight block once for the group, and gives each token the GEMV's own arithmetic, so each output
// is its vec_dot's bits whatever tokens share the group (batch invariance).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tern::cpu {
namespace {

constexpr int kGroupTokens = 4;

// out[c] = the dot of one weight row against activation row a_rows[c], for each of the
// micro-kernel's tokens (kGroupTokens for the tile, 1 for the GEMV).
using GroupMicroFn = void (*)(int64_t k, const void* w_row, const void* const* a_rows, float* out);

// The GEMV over a micro-kernel instantiated for one token: the same code as the tile's groups,
// so the two agree by construction.
template <GroupMicroFn Micro>
float vec_dot_one_token(int64_t k, const void* w_row, const void* a_row) {
  float out;
  Micro(k, w_row, &a_row, &out);
  return out;
}

// Tokens outer, so a group's activation rows stay in L1 while the tile's weight rows stream
// past. A ragged edge of fewer tokens repeats the last one and drops its outputs (a token's
// arithmetic never looks at its neighbours, so the repeats cost time only).
template <GroupMicroFn Micro>
void gemm_tile_token_groups(int64_t k, const void* w_data, size_t w_stride, int64_t rows,
                            const void* a_data, size_t a_stride, int64_t tokens, float* y,
                            size_t ldy) {
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  for (int64_t c0 = 0; c0 < tokens; c0 += kGroupTokens) {
    const int cc = static_cast<int>(std::min<int64_t>(kGroupTokens, tokens - c0));
    const void* a[kGroupTokens];
    for (int c = 0; c < kGroupTokens; ++c)
      a[c] = abytes + (c0 + std::min(c, cc - 1)) * static_cast<int64_t>(a_stride);
    for (int64_t r = 0; r < rows; ++r) {
      float out[kGroupTokens];
      Micro(k, wbytes + r * static_cast<int64_t>(w_stride), a, out);
      for (int c = 0; c < cc; ++c) y[(c0 + c) * static_cast<int64_t>(ldy) + r] = out[c];
    }
  }
}

}  // namespace
}  // namespace tern::cpu
