// GEMM tiles of Q4_0 and Q8_0 weights with smmla (i8mm): one instruction multiplies a 2 × 8
// int8 matrix (8 elements of two weight rows) by the transpose of another (the same 8 elements
// of two tokens) into the four exact int32 sums, so a 32-element block of a 2-row × 2-token
// tile is 4 instructions, each weight byte loaded once for both tokens. Every output is bit for
// bit the level's vec_dot (dotprod/vec_dot_q.cpp): the same exact isums, the same 16 chains and
// tree (vec_dot_q_neon.h). Rows and tokens left over from the pairs take that vec_dot.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "tern/kernels/cpu/arch/arm/dotprod/sdot.h"
#include "tern/kernels/cpu/arch/arm/lanes16_neon.h"
#include "tern/kernels/cpu/arch/arm/vec_dot_q_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

inline int8x16_t zip_lo(int8x16_t x, int8x16_t y) {  // [x 0-7, y 0-7]
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}
inline int8x16_t zip_hi(int8x16_t x, int8x16_t y) {  // [x 8-15, y 8-15]
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}

// One block of rows w0, w1 against tokens a0, a1: [w0·a0, w0·a1, w1·a0, w1·a1], exact.
template <class W>
inline int32x4_t block_mm(const W& w0, const W& w1, const BlockQ8_0& a0, const BlockQ8_0& a1) {
  int8x16_t w0lo, w0hi, w1lo, w1hi;
  block_weights(w0, w0lo, w0hi);
  block_weights(w1, w1lo, w1hi);
  const int8x16_t a0lo = vld1q_s8(a0.qs), a0hi = vld1q_s8(a0.qs + 16);
  const int8x16_t a1lo = vld1q_s8(a1.qs), a1hi = vld1q_s8(a1.qs + 16);
  int32x4_t acc = vmmlaq_s32(vdupq_n_s32(0), zip_lo(w0lo, w1lo), zip_lo(a0lo, a1lo));
  acc = vmmlaq_s32(acc, zip_hi(w0lo, w1lo), zip_hi(a0lo, a1lo));
  acc = vmmlaq_s32(acc, zip_lo(w0hi, w1hi), zip_lo(a0hi, a1hi));
  return vmmlaq_s32(acc, zip_hi(w0hi, w1hi), zip_hi(a0hi, a1hi));
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

// f16 scales of n ≤ 4 blocks as floats (0 past n).
template <class Block>
inline float32x4_t scales4(const Block* x, int n) {
  uint16_t h[4] = {};
  for (int i = 0; i < n; ++i) h[i] = x[i].d;
  return f16x4_to_f32(h);
}

// Rows w[0], w[1] × tokens a[0], a[1] → y[t * ldy + r].
template <class W>
void tile2x2(int64_t nb, const W* const w[2], const BlockQ8_0* const a[2], float* y, size_t ldy) {
  Chains16 chains[4];  // output e = 2 · row + token, smmla's order
  for (int64_t b = 0; b < nb; b += 4) {
    const int n = nb - b < 4 ? static_cast<int>(nb - b) : 4;
    int32x4_t per_block[4], per_output[4];
    for (int i = 0; i < 4; ++i)
      per_block[i] =
          i < n ? block_mm(w[0][b + i], w[1][b + i], a[0][b + i], a[1][b + i]) : vdupq_n_s32(0);
    transpose4(per_block, per_output);
    const float32x4_t wd[2] = {scales4(w[0] + b, n), scales4(w[1] + b, n)};
    const float32x4_t ad[2] = {scales4(a[0] + b, n), scales4(a[1] + b, n)};
    for (int e = 0; e < 4; ++e)
      fma_blocks4(chains[e], b, per_output[e], vmulq_f32(wd[e / 2], ad[e % 2]));
  }
  for (int e = 0; e < 4; ++e) y[(e % 2) * ldy + e / 2] = sum_chains(chains[e]);
}

template <class W>
void gemm_tile(int64_t k, const void* vw, size_t w_stride, int64_t rows, const void* va,
               size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(vw);
  const auto* ab = static_cast<const uint8_t*>(va);
  auto row = [&](int64_t r) { return reinterpret_cast<const W*>(wb + r * w_stride); };
  auto token = [&](int64_t t) { return reinterpret_cast<const BlockQ8_0*>(ab + t * a_stride); };
  const int64_t row_pairs = rows / 2 * 2, token_pairs = tokens / 2 * 2;
  for (int64_t r = 0; r < row_pairs; r += 2) {
    const W* const w[2] = {row(r), row(r + 1)};
    for (int64_t t = 0; t < token_pairs; t += 2) {
      const BlockQ8_0* const a[2] = {token(t), token(t + 1)};
      tile2x2(k / kQK, w, a, y + t * ldy + r, ldy);
    }
  }
  // The odd row and token out: the level's vec_dot, element by element.
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t r = t < token_pairs ? row_pairs : 0; r < rows; ++r)
      y[t * ldy + r] = vec_dot_q<SdotDot, W>(k, row(r), token(t));
}

}  // namespace

GemmTileFn i8mm_gemm_tile_q(DType weight) {
  switch (weight) {
    case DType::Q4_0:
      return gemm_tile<BlockQ4_0>;
    case DType::Q8_0:
      return gemm_tile<BlockQ8_0>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
