// Q4_0 and Q8_0 (Q8_0 activations) in the 16-chain arithmetic, for any integer-dot policy
// (lanes16_neon.h): neon/vec_dot_q.cpp and dotprod/vec_dot_q.cpp instantiate it with theirs.
// Per block the exact isum (the policy's dots over 32 elements), per 4 blocks one fused
// multiply-add into 4 chains.
#pragma once

#include <arm_neon.h>

#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/arm/lanes16_neon.h"

namespace tern::cpu {
namespace {

// The 32 weights of a block as int8: elements 0-15 in lo, 16-31 in hi.
inline void block_weights(const BlockQ4_0& w, int8x16_t& lo, int8x16_t& hi) {
  const uint8x16_t bits = vld1q_u8(w.qs);
  const int8x16_t eight = vdupq_n_s8(8);
  lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(bits, vdupq_n_u8(0x0f))), eight);
  hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(bits, 4)), eight);
}
inline void block_weights(const BlockQ8_0& w, int8x16_t& lo, int8x16_t& hi) {
  lo = vld1q_s8(w.qs);
  hi = vld1q_s8(w.qs + 16);
}

// 4 int32 lanes summing to the block's isum.
template <class Dot, class W>
inline int32x4_t block_dot(const W& w, const BlockQ8_0& a) {
  int8x16_t lo, hi;
  block_weights(w, lo, hi);
  const int32x4_t acc = Dot::dot(vdupq_n_s32(0), lo, vld1q_s8(a.qs));
  return Dot::dot(acc, hi, vld1q_s8(a.qs + 16));
}

// f16(w.d) · f16(a.d) of n ≤ 4 blocks (0 past n).
template <class W>
inline float32x4_t block_scales(const W* w, const BlockQ8_0* a, int n) {
  uint16_t wd[4] = {}, ad[4] = {};
  for (int i = 0; i < n; ++i) wd[i] = w[i].d, ad[i] = a[i].d;
  return vmulq_f32(f16x4_to_f32(wd), f16x4_to_f32(ad));
}

template <class Dot, class W>
float vec_dot_q(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const W*>(w_row);
  const auto* a = static_cast<const BlockQ8_0*>(a_row);
  const int64_t nb = k / kQK;
  Chains16 chains;
  for (int64_t b = 0; b < nb; b += 4) {
    const int n = nb - b < 4 ? static_cast<int>(nb - b) : 4;
    int32x4_t d[4];
    for (int i = 0; i < 4; ++i) d[i] = i < n ? block_dot<Dot>(w[b + i], a[b + i]) : vdupq_n_s32(0);
    fma_blocks4(chains, b, totals4(d[0], d[1], d[2], d[3]), block_scales(w + b, a + b, n));
  }
  return sum_chains(chains);
}

}  // namespace
}  // namespace tern::cpu
