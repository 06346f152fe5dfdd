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

// block_sums(w[g], sub, a) → the sums of block `sub` of group w[g] against activation block a.
template <class B, class BlockSums>
inline float affine_group_dot(int64_t k, const void* vw, const void* va,
                              const BlockSums& block_sums) {
  constexpr int kBlocksPerGroup = B::kElems / kQK;
  const auto* w = static_cast<const B*>(vw);
  const auto* a = static_cast<const BlockQ8_0*>(va);
  float chains[16] = {};
  for (int64_t g = 0; g < k / B::kElems; ++g) {
    float u = 0.0f, group_sum = 0.0f;
    for (int sub = 0; sub < kBlocksPerGroup; ++sub) {
      const BlockQ8_0& ab = a[g * kBlocksPerGroup + sub];
      const AffineBlockSums s = block_sums(w[g], sub, ab);
      const float d = f16_to_f32(ab.d);
      u = std::fma(static_cast<float>(s.isum), d, u);
      group_sum = std::fma(static_cast<float>(s.asum), d, group_sum);
    }
    float& chain = chains[g % 16];
    chain = std::fma(w[g].scale, u, chain);
    chain = std::fma(w[g].bias, group_sum, chain);
  }
  for (int width = 8; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) chains[j] += chains[j + width];
  return chains[0];
}

}  // namespace
}  // namespace tern::cpu
