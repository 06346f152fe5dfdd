// The float steps of the affine groups' dot (INT4_G*, INT8_G*) against Q8_0 activations, in the
// order generic/vec_dot_affine.cpp defines (its comment has the arithmetic), shared by the levels
// that compute a block's integer sums each in its own way: the sums are exact, so every level
// that uses these steps gives the scalar twin's result bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/core/half.h"

namespace tern::cpu {
// Internal linkage: each instruction set's kernels are compiled with their own flags (core/half.h).
namespace {

struct AffineBlockSums {
  int32_t isum;  // Σ q · a over the 32-element block
  int32_t asum;  // Σ a
};

// out[t] for t < kTokens: the dot of the row w against activation row a[t]. block_sums(w[g],
// sub, b, isum, asum) fills isum[t] and asum[t] for every token: the sums of block `sub` of group
// w[g] against activation block b of token t, so that a level can unpack a weight block once for
// all the tokens (and the float steps of the tokens run side by side, in vector lanes).
template <class B, int kTokens, class BlockSums>
inline void affine_group_dots(int64_t k, const B* w, const BlockQ8_0* const* a,
                              const BlockSums& block_sums, float* out) {
  constexpr int kBlocksPerGroup = B::kElems / kQK;
  float chains[16][kTokens] = {};
  int32_t isum[kTokens], asum[kTokens];
  for (int64_t g = 0; g < k / B::kElems; ++g) {
    float u[kTokens] = {}, group_sum[kTokens] = {};
    for (int sub = 0; sub < kBlocksPerGroup; ++sub) {
      const int64_t b = g * kBlocksPerGroup + sub;
      block_sums(w[g], sub, b, isum, asum);
      for (int t = 0; t < kTokens; ++t) {
        const float d = f16_to_f32(a[t][b].d);
        u[t] = std::fma(static_cast<float>(isum[t]), d, u[t]);
        group_sum[t] = std::fma(static_cast<float>(asum[t]), d, group_sum[t]);
      }
    }
    float* chain = chains[g % 16];
    for (int t = 0; t < kTokens; ++t) {
      chain[t] = std::fma(w[g].scale, u[t], chain[t]);
      chain[t] = std::fma(w[g].bias, group_sum[t], chain[t]);
    }
  }
  for (int width = 8; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j)
      for (int t = 0; t < kTokens; ++t) chains[j][t] += chains[j + width][t];
  for (int t = 0; t < kTokens; ++t) out[t] = chains[0][t];
}

// One activation row: block_sums(w[g], sub, activation block) → its sums.
template <class B, class BlockSums>
inline float affine_group_dot(int64_t k, const void* vw, const void* va,
                              const BlockSums& block_sums) {
  const auto* a = static_cast<const BlockQ8_0*>(va);
  float out;
  affine_group_dots<B, 1>(
      k, static_cast<const B*>(vw), &a,
      [&](const B& wg, int sub, int64_t b, int32_t* isum, int32_t* asum) {
        const AffineBlockSums s = block_sums(wg, sub, a[b]);
        isum[0] = s.isum;
        asum[0] = s.asum;
      },
      &out);
  return out;
}

}  // namespace
}  // namespace tern::cpu
