// What the i8mm tiles share (gemm_tile_q.cpp, gemm_tile_k.cpp): smmla multiplies a 2 × 8 int8
// matrix (8 elements of two weight rows) by the transpose of another (the same 8 elements of
// two tokens) into four exact int32 sums [r0·t0, r0·t1, r1·t0, r1·t1], so a 2-row × 2-token
// tile reads each weight byte once for both tokens. The tile's four outputs keep 16 chains
// each, fed as the level's vec_dot feeds its one (lanes16_neon.h), so every output is bit for
// bit that vec_dot. Internal linkage; only for files compiled with +i8mm.
#pragma once

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "tern/kernels/cpu/arch/arm/lanes16_neon.h"

namespace tern::cpu {
namespace {

inline int8x16_t zip_lo(int8x16_t x, int8x16_t y) {  // [x 0-7, y 0-7]
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}
inline int8x16_t zip_hi(int8x16_t x, int8x16_t y) {  // [x 8-15, y 8-15]
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}

// Σ over 16 elements of rows w0, w1 against tokens a0, a1 into acc's four outputs.
inline int32x4_t mm16(int32x4_t acc, int8x16_t w0, int8x16_t w1, int8x16_t a0, int8x16_t a1) {
  acc = vmmlaq_s32(acc, zip_lo(w0, w1), zip_lo(a0, a1));
  return vmmlaq_s32(acc, zip_hi(w0, w1), zip_hi(a0, a1));
}

// m[i] lane e → out[e] lane i.
inline void transpose4(const int32x4_t m[4], int32x4_t out[4]) {
  const int32x4_t t0 = vtrn1q_s32(m[0], m[1]), t1 = vtrn2q_s32(m[0], m[1]);
  const int32x4_t t2 = vtrn1q_s32(m[2], m[3]), t3 = vtrn2q_s32(m[2], m[3]);
  auto zip1 = [](int32x4_t x, int32x4_t y) {
    return vreinterpretq_s32_s64(vzip1q_s64(vreinterpretq_s64_s32(x), vreinterpretq_s64_s32(y)));
  };
  auto zip2 = [](int32x4_t x, int32x4_t y) {
    return vreinterpretq_s32_s64(vzip2q_s64(vreinterpretq_s64_s32(x), vreinterpretq_s64_s32(y)));
  };
  out[0] = zip1(t0, t2), out[1] = zip1(t1, t3), out[2] = zip2(t0, t2), out[3] = zip2(t1, t3);
}

// Four (super-)blocks' exact sums of the tile's outputs (per_block[i]: block i's, in smmla's
// order; zeros for blocks past the row) into the outputs' chains, each output's scales the
// product of its row's and its token's: chain = fma(sum, w_scale · a_scale, chain), or with
// −sum (the K types' mins term) when `subtract`.
inline void fma_tile_blocks4(Chains16 chains[4], int64_t first_block, const int32x4_t per_block[4],
                             const float32x4_t w_scale[2], const float32x4_t a_scale[2],
                             bool subtract = false) {
  int32x4_t per_output[4];
  transpose4(per_block, per_output);
  for (int e = 0; e < 4; ++e) {
    const float32x4_t scale = vmulq_f32(w_scale[e / 2], a_scale[e % 2]);
    if (subtract) {
      fms_blocks4(chains[e], first_block, per_output[e], scale);
    } else {
      fma_blocks4(chains[e], first_block, per_output[e], scale);
    }
  }
}

// The 2 × 2 tile's outputs (e = 2 · row + token) to y[token · ldy + row].
inline void store_tile(const Chains16 chains[4], float* y, size_t ldy) {
  for (int e = 0; e < 4; ++e) y[(e % 2) * ldy + e / 2] = sum_chains(chains[e]);
}

// A GemmTileFn from a Kind with W (weight block), A (activation block), tile2x2(blocks, w[2],
// a[2], y, ldy) and vec_dot: rows and tokens in pairs through the tiles, the odd row and token
// out through vec_dot, element by element.
template <class Kind>
void gemm_tile_2x2(int64_t k, const void* vw, size_t w_stride, int64_t rows, const void* va,
                   size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  using W = typename Kind::W;
  using A = typename Kind::A;
  const auto* wb = static_cast<const uint8_t*>(vw);
  const auto* ab = static_cast<const uint8_t*>(va);
  auto row = [&](int64_t r) { return reinterpret_cast<const W*>(wb + r * w_stride); };
  auto token = [&](int64_t t) { return reinterpret_cast<const A*>(ab + t * a_stride); };
  const int64_t blocks = k / Kind::kBlockElems;
  const int64_t row_pairs = rows / 2 * 2, token_pairs = tokens / 2 * 2;
  for (int64_t r = 0; r < row_pairs; r += 2) {
    const W* const w[2] = {row(r), row(r + 1)};
    for (int64_t t = 0; t < token_pairs; t += 2) {
      const A* const a[2] = {token(t), token(t + 1)};
      Kind::tile2x2(blocks, w, a, y + t * ldy + r, ldy);
    }
  }
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t r = t < token_pairs ? row_pairs : 0; r < rows; ++r)
      y[t * ldy + r] = Kind::vec_dot(k, row(r), token(t));
}

}  // namespace
}  // namespace tern::cpu
