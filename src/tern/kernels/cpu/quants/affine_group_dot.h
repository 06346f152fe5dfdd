// The float steps of the affine groups' dot (INT4_G*, INT8_G*) against Q8_0 activations, in the
// order generic/vec_dot_affine.cpp defines (its comment has the arithmetic), shared by the levels
// that compute a block's integer sums each in its own way: the sums are exact, so every level
// that uses these steps gives the scalar twin's result bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

#include "tern/core/half.h"
#include "tern/kernels/cpu/quants/quant_blocks.h"

namespace tern::cpu {
// Internal linkage: each instruction set's kernels are compiled with their own flags (core/half.h).
namespace {

struct AffineBlockSums {
  int32_t isum;  // Σ q · a over the 32-element block
  int32_t asum;  // Σ a
};

// out[t] for t < tokens ≤ kMaxTokens: the dot of the row w against activation row a[t].
// block_sums(w[g], sub, b, sums) fills sums[t] for every token: the sums of block `sub` of group
// w[g] against activation block b of token t, so that a level can unpack a weight block once for
// all the tokens.
template <class B, int kMaxTokens, class BlockSums>
inline void affine_group_dots(int64_t k, const B* w, const BlockQ8_0* const* a, int tokens,
                              const BlockSums& block_sums, float* out) {
  constexpr int kBlocksPerGroup = B::kElems / kQK;
  float chains[kMaxTokens][16] = {};
  AffineBlockSums sums[kMaxTokens];
  for (int64_t g = 0; g < k / B::kElems; ++g) {
    float u[kMaxTokens] = {}, group_sum[kMaxTokens] = {};
    for (int sub = 0; sub < kBlocksPerGroup; ++sub) {
      const int64_t b = g * kBlocksPerGroup + sub;
      block_sums(w[g], sub, b, sums);
      for (int t = 0; t < tokens; ++t) {
        const float d = f16_to_f32(a[t][b].d);
        u[t] = std::fma(static_cast<float>(sums[t].isum), d, u[t]);
        group_sum[t] = std::fma(static_cast<float>(sums[t].asum), d, group_sum[t]);
      }
    }
    for (int t = 0; t < tokens; ++t) {
      float& chain = chains[t][g % 16];
      chain = std::fma(w[g].scale, u[t], chain);
      chain = std::fma(w[g].bias, group_sum[t], chain);
    }
  }
  for (int t = 0; t < tokens; ++t) {
    for (int width = 8; width >= 1; width /= 2)
      for (int j = 0; j < width; ++j) chains[t][j] += chains[t][j + width];
    out[t] = chains[t][0];
  }
}

// One activation row: block_sums(w[g], sub, activation block) → its sums.
template <class B, class BlockSums>
inline float affine_group_dot(int64_t k, const void* vw, const void* va,
                              const BlockSums& block_sums) {
  const auto* a = static_cast<const BlockQ8_0*>(va);
  float out;
  affine_group_dots<B, 1>(
      k, static_cast<const B*>(vw), &a, 1,
      [&](const B& wg, int sub, int64_t b, AffineBlockSums* sums) {
        sums[0] = block_sums(wg, sub, a[b]);
      },
      &out);
  return out;
}

}  // namespace
}  // namespace tern::cpu
