// Q4_K, Q5_K and Q6_K (Q8_K activations) in the 16-chain arithmetic, for any integer-dot
// policy (lanes16_neon.h): neon/vec_dot_k.cpp and dotprod/vec_dot_k.cpp instantiate it with
// theirs. Per super-block the exact S1 and S2 (Q6_K: S) of generic/vec_dot_16lane.cpp, per 4
// super-blocks one fused multiply-add (and one fused multiply-subtract) into 4 chains.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <type_traits>

#include "tern/blocks/block_layouts.h"
#include "tern/blocks/k_scales.h"
#include "tern/kernels/cpu/arch/arm/lanes16_neon.h"

namespace tern::cpu {
namespace {

template <class Block>
constexpr bool kHasMins = !std::is_same_v<Block, BlockQ6_K>;

inline int32x4_t lanes_of(const int v[4]) { return vld1q_s32(v); }

// The 5th bit of 16 quants from 16 qh bytes: 0x10 where bit `bit` of the byte is set.
inline uint8x16_t high_bit(uint8x16_t qh, int bit) {
  return vandq_u8(vtstq_u8(qh, vdupq_n_u8(static_cast<uint8_t>(1u << bit))), vdupq_n_u8(0x10));
}

// Q4_K / Q5_K sub-blocks 2p (q[0], q[1]: its elements 0-15 and 16-31) and 2p + 1 (q[2], q[3])
// as int8 quants (0..31): the two share 32 bytes of qs, low nibbles and high ones.
template <class Block>
inline void k_affine_pair(const Block& w, int p, int8x16_t q[4]) {
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
  const uint8x16_t b0 = vld1q_u8(w.qs + 32 * p), b1 = vld1q_u8(w.qs + 32 * p + 16);
  uint8x16_t u[4] = {vandq_u8(b0, low4), vandq_u8(b1, low4), vshrq_n_u8(b0, 4), vshrq_n_u8(b1, 4)};
  if constexpr (std::is_same_v<Block, BlockQ5_K>) {
    const uint8x16_t qh[2] = {vld1q_u8(w.qh), vld1q_u8(w.qh + 16)};
    for (int i = 0; i < 4; ++i) u[i] = vorrq_u8(u[i], high_bit(qh[i % 2], 2 * p + i / 2));
  }
  for (int i = 0; i < 4; ++i) q[i] = vreinterpretq_s8_u8(u[i]);
}

// The 16 quants of Q6_K sub-block s (elements 16s .. 16s + 15), less 32, as int8.
inline int8x16_t q6_k_sub_block(const BlockQ6_K& w, int s) {
  // Element e = 128h + 32g + r: low bits in ql[64h + 32(g % 2) + r] (low nibble for g < 2),
  // high bits 2g, 2g + 1 of qh[32h + r].
  const int h = s / 8, g = s % 8 / 2, r0 = 16 * (s % 2);
  const uint8x16_t bits = vld1q_u8(w.ql + 64 * h + 32 * (g % 2) + r0);
  const uint8x16_t nibble = g < 2 ? vandq_u8(bits, vdupq_n_u8(0x0f)) : vshrq_n_u8(bits, 4);
  const uint8x16_t top =
      vandq_u8(vshlq_u8(vld1q_u8(w.qh + 32 * h + r0), vdupq_n_s8(static_cast<int8_t>(-2 * g))),
               vdupq_n_u8(0x03));
  return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(nibble, vshlq_n_u8(top, 4))), vdupq_n_s8(32));
}

// Q4_K / Q5_K: S1 = Σ_j sc_j Σ_l q·a over the 8 sub-blocks of 32, S2 = Σ_j m_j (bsum_2j +
// bsum_2j+1).
template <class Dot, class Block>
inline void superblock_sums(const Block& w, const BlockQ8_K& a, int32_t& s1, int32_t& s2) {
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) unpack_k_scale_min(w.scales, j, &sc[j], &m[j]);
  int32x4_t dots[8];
  for (int p = 0; p < 4; ++p) {
    int8x16_t q[4];
    k_affine_pair(w, p, q);
    const int8_t* y = a.qs + 64 * p;
    for (int half = 0; half < 2; ++half) {
      const int32x4_t lo = Dot::dot(vdupq_n_s32(0), q[2 * half], vld1q_s8(y + 32 * half));
      dots[2 * p + half] = Dot::dot(lo, q[2 * half + 1], vld1q_s8(y + 32 * half + 16));
    }
  }
  const int32x4_t scaled =
      vaddq_s32(vmulq_s32(totals4(dots[0], dots[1], dots[2], dots[3]), lanes_of(sc)),
                vmulq_s32(totals4(dots[4], dots[5], dots[6], dots[7]), lanes_of(sc + 4)));
  s1 = vaddvq_s32(scaled);
  // Pairs of 16-element sums: one per sub-block of 32 (each ≤ 32 · 128, int16).
  const int16x8_t bsum32 = vpaddq_s16(vld1q_s16(a.bsums), vld1q_s16(a.bsums + 8));
  const int32x4_t mins = vaddq_s32(vmulq_s32(vmovl_s16(vget_low_s16(bsum32)), lanes_of(m)),
                                   vmulq_s32(vmovl_high_s16(bsum32), lanes_of(m + 4)));
  s2 = vaddvq_s32(mins);
}

// Q6_K: S = Σ_s sc_s Σ_l (q − 32)·a over the 16 sub-blocks of 16.
template <class Dot>
inline void superblock_sums(const BlockQ6_K& w, const BlockQ8_K& a, int32_t& s, int32_t&) {
  int32x4_t dots[16];
  for (int sub = 0; sub < 16; ++sub)
    dots[sub] = Dot::dot(vdupq_n_s32(0), q6_k_sub_block(w, sub), vld1q_s8(a.qs + 16 * sub));
  const int8x16_t sc8 = vld1q_s8(w.scales);
  const int16x8_t sc_lo = vmovl_s8(vget_low_s8(sc8)), sc_hi = vmovl_high_s8(sc8);
  int32x4_t sum =
      vmulq_s32(totals4(dots[0], dots[1], dots[2], dots[3]), vmovl_s16(vget_low_s16(sc_lo)));
  sum = vmlaq_s32(sum, totals4(dots[4], dots[5], dots[6], dots[7]), vmovl_high_s16(sc_lo));
  sum =
      vmlaq_s32(sum, totals4(dots[8], dots[9], dots[10], dots[11]), vmovl_s16(vget_low_s16(sc_hi)));
  sum = vmlaq_s32(sum, totals4(dots[12], dots[13], dots[14], dots[15]), vmovl_high_s16(sc_hi));
  s = vaddvq_s32(sum);
}

template <class Dot, class Block>
float vec_dot_k(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const Block*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  const int64_t nb = k / kQKK;
  Chains16 chains;
  for (int64_t b = 0; b < nb; b += 4) {
    const int n = nb - b < 4 ? static_cast<int>(nb - b) : 4;
    int32_t s1[4] = {}, s2[4] = {};
    uint16_t d[4] = {}, dmin[4] = {};
    float a_d[4] = {};
    for (int i = 0; i < n; ++i) {
      superblock_sums<Dot>(w[b + i], a[b + i], s1[i], s2[i]);
      d[i] = w[b + i].d;
      if constexpr (kHasMins<Block>) dmin[i] = w[b + i].dmin;
      a_d[i] = a[b + i].d;
    }
    const float32x4_t ad = vld1q_f32(a_d);
    fma_blocks4(chains, b, vld1q_s32(s1), vmulq_f32(f16x4_to_f32(d), ad));
    if constexpr (kHasMins<Block>)
      fms_blocks4(chains, b, vld1q_s32(s2), vmulq_f32(f16x4_to_f32(dmin), ad));
  }
  return sum_chains(chains);
}

}  // namespace
}  // namespace tern::cpu
