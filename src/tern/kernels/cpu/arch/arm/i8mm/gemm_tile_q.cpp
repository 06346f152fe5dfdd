// GEMM tiles of Q4_0 and Q8_0 weights with smmla (tile2x2.h): a 32-element block of a 2-row ×
// 2-token tile is 4 instructions. Every output is bit for bit the level's vec_dot
// (dotprod/vec_dot_q.cpp): the same exact isums, the same 16 chains and tree.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "tern/kernels/cpu/arch/arm/dotprod/sdot.h"
#include "tern/kernels/cpu/arch/arm/i8mm/tile2x2.h"
#include "tern/kernels/cpu/arch/arm/vec_dot_q_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// One block of rows w0, w1 against tokens a0, a1: [w0·a0, w0·a1, w1·a0, w1·a1], exact.
template <class W>
inline int32x4_t block_mm(const W& w0, const W& w1, const BlockQ8_0& a0, const BlockQ8_0& a1) {
  int8x16_t w0lo, w0hi, w1lo, w1hi;
  block_weights(w0, w0lo, w0hi);
  block_weights(w1, w1lo, w1hi);
  const int32x4_t acc = mm16(vdupq_n_s32(0), w0lo, w1lo, vld1q_s8(a0.qs), vld1q_s8(a1.qs));
  return mm16(acc, w0hi, w1hi, vld1q_s8(a0.qs + 16), vld1q_s8(a1.qs + 16));
}

// f16 scales of n ≤ 4 blocks as floats (0 past n).
template <class Block>
inline float32x4_t scales4(const Block* x, int n) {
  uint16_t h[4] = {};
  for (int i = 0; i < n; ++i) h[i] = x[i].d;
  return f16x4_to_f32(h);
}

template <class Weight>
struct QKind {
  using W = Weight;
  using A = BlockQ8_0;
  static constexpr int64_t kBlockElems = kQK;
  static float vec_dot(int64_t k, const void* w, const void* a) {
    return vec_dot_q<SdotDot, W>(k, w, a);
  }
  static void tile2x2(int64_t nb, const W* const w[2], const A* const a[2], float* y, size_t ldy) {
    Chains16 chains[4];
    for (int64_t b = 0; b < nb; b += 4) {
      const int n = nb - b < 4 ? static_cast<int>(nb - b) : 4;
      int32x4_t per_block[4];
      for (int i = 0; i < 4; ++i)
        per_block[i] =
            i < n ? block_mm(w[0][b + i], w[1][b + i], a[0][b + i], a[1][b + i]) : vdupq_n_s32(0);
      const float32x4_t wd[2] = {scales4(w[0] + b, n), scales4(w[1] + b, n)};
      const float32x4_t ad[2] = {scales4(a[0] + b, n), scales4(a[1] + b, n)};
      fma_tile_blocks4(chains, b, per_block, wd, ad);
    }
    store_tile(chains, y, ldy);
  }
};

}  // namespace

GemmTileFn i8mm_gemm_tile_q(DType weight) {
  switch (weight) {
    case DType::Q4_0:
      return gemm_tile_2x2<QKind<BlockQ4_0>>;
    case DType::Q8_0:
      return gemm_tile_2x2<QKind<BlockQ8_0>>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
