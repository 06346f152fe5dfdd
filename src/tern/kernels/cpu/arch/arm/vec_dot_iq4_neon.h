// IQ4_NL, IQ4_XS and MXFP4 on ARM, bit for bit the scalar twins of generic/vec_dot.cpp (these
// types' every level meets the floats in the scalar order), for either integer-dot policy:
// neon/vec_dot_iq4.cpp and dotprod/vec_dot_iq4.cpp instantiate it. A nibble picks its level
// (kIq4Levels or kMxfp4Levels, never −128) by tbl from a 16-byte table.
#pragma once

#include <arm_neon.h>

#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/arch/arm/lanes16_neon.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {
namespace {

// Lane m of acc += Σ x_e y_e over elements 4m..4m+3 of 16 int8 pairs — sdot's lanes, which the
// IQ4_NL twin's float lanes need — with widening multiplies (each product fits int16, an
// activation being never −128).
struct QuadWideningDot {
  static int32x4_t dot(int32x4_t acc, int8x16_t x, int8x16_t y) {
    const int32x4_t pairs_lo = vpaddlq_s16(vmull_s8(vget_low_s8(x), vget_low_s8(y)));
    const int32x4_t pairs_hi = vpaddlq_s16(vmull_high_s8(x, y));
    return vaddq_s32(acc, vpaddq_s32(pairs_lo, pairs_hi));
  }
};

// The levels of a group of 32 (qs: element j in the low nibble of qs[j], j + 16 in the high one):
// elements 0-15 in lo, 16-31 in hi.
inline void group_levels(const uint8_t* qs, int8x16_t table, int8x16_t& lo, int8x16_t& hi) {
  const uint8x16_t bits = vld1q_u8(qs);
  lo = vqtbl1q_s8(table, vandq_u8(bits, vdupq_n_u8(0x0f)));
  hi = vqtbl1q_s8(table, vshrq_n_u8(bits, 4));
}

inline const int8_t* lookup_levels(const BlockIq4Nl*) { return kIq4Levels; }
inline const int8_t* lookup_levels(const BlockMxfp4*) { return kMxfp4Levels; }
inline float lookup_scale(const BlockIq4Nl& w) { return f16_to_f32(w.d); }
inline float lookup_scale(const BlockMxfp4& w) { return mxfp4_scale(w.e); }

// IQ4_NL and MXFP4: the twin's 16 float lanes as four registers, lanes 8 (b % 2) + m of block b
// in registers 2 (b % 2) and 2 (b % 2) + 1; each takes its lane sum by one fused multiply-add;
// sum_chains is the twin's tree (j + 8, + 4, + 2, + 1).
template <class Dot, typename Block>
float dot_lookup(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const Block*>(w_row);
  const auto* a = static_cast<const BlockQ8_0*>(a_row);
  const int8x16_t table = vld1q_s8(lookup_levels(w));
  float32x4_t lanes[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),
                          vdupq_n_f32(0.0f)};
  for (int64_t b = 0; b < k / kQK; ++b) {
    int8x16_t lo, hi;
    group_levels(w[b].qs, table, lo, hi);
    const int32x4_t sums_lo = Dot::dot(vdupq_n_s32(0), lo, vld1q_s8(a[b].qs));
    const int32x4_t sums_hi = Dot::dot(vdupq_n_s32(0), hi, vld1q_s8(a[b].qs + 16));
    const float32x4_t scale = vdupq_n_f32(lookup_scale(w[b]) * f16_to_f32(a[b].d));
    float32x4_t* l = lanes + 2 * (b % 2);
    l[0] = vfmaq_f32(l[0], vcvtq_f32_s32(sums_lo), scale);
    l[1] = vfmaq_f32(l[1], vcvtq_f32_s32(sums_hi), scale);
  }
  return sum_chains(lanes);
}

// IQ4_XS: per super-block Σ_j (ls_j − 32) · Σ level · a exact in int32 (any order), then the
// twin's one float step.
template <class Dot>
float dot_iq4_xs(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockIq4Xs*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  const int8x16_t table = vld1q_s8(kIq4Levels);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    int32x4_t sumi = vdupq_n_s32(0);
    for (int j = 0; j < kQKK / kQK; ++j) {
      int8x16_t lo, hi;
      group_levels(w[i].qs + 16 * j, table, lo, hi);
      const int8_t* act = a[i].qs + kQK * j;
      const int32x4_t group =
          Dot::dot(Dot::dot(vdupq_n_s32(0), lo, vld1q_s8(act)), hi, vld1q_s8(act + 16));
      sumi = vmlaq_n_s32(sumi, group, iq4_xs_scale(w[i], j) - 32);
    }
    sum += (a[i].d * f16_to_f32(w[i].d)) * static_cast<float>(vaddvq_s32(sumi));
  }
  return sum;
}

// The IQ4 family's GEMV for a policy; nullptr for other types.
template <class Dot>
VecDotFn vec_dot_iq4(DType weight) {
  switch (weight) {
    case DType::IQ4_NL:
      return dot_lookup<Dot, BlockIq4Nl>;
    case DType::IQ4_XS:
      return dot_iq4_xs<Dot>;
    case DType::MXFP4:
      return dot_lookup<Dot, BlockMxfp4>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace tern::cpu
