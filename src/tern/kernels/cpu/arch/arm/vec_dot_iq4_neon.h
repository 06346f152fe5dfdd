// IQ4_NL, IQ4_XS and MXFP4 on ARM, bit for bit the scalar twins of generic/vec_dot.cpp (these
// types' every level meets the floats in the scalar order), for either integer-dot policy:
// neon/vec_dot_iq4.cpp and dotprod/vec_dot_iq4.cpp instantiate it. A nibble picks its level
// (kIq4Levels or kMxfp4Levels, never −128) by tbl from a 16-byte table. The GEMV and the GEMM
// tile run the same micro-kernels (one token, or a group of kGroupTokens), so the tile is the
// GEMV's bits.
#pragma once

#include <arm_neon.h>

#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/arch/arm/lanes16_neon.h"
#include "tern/kernels/cpu/arch/arm/token_group_tile_neon.h"
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
// sum_chains is the twin's tree (j + 8, + 4, + 2, + 1). For C tokens a_rows[c], each block's
// levels looked up once for all of them.
template <class Dot, typename Block, int C>
void lookup_rows(int64_t k, const void* w_row, const void* const* a_rows, float* out) {
  const auto* w = static_cast<const Block*>(w_row);
  const int8x16_t table = vld1q_s8(lookup_levels(w));
  const BlockQ8_0* a[C];
  float32x4_t lanes[C][4];
  for (int c = 0; c < C; ++c) {
    a[c] = static_cast<const BlockQ8_0*>(a_rows[c]);
    for (float32x4_t& l : lanes[c]) l = vdupq_n_f32(0.0f);
  }
  for (int64_t b = 0; b < k / kQK; ++b) {
    int8x16_t lo, hi;
    group_levels(w[b].qs, table, lo, hi);
    const float w_scale = lookup_scale(w[b]);
    for (int c = 0; c < C; ++c) {
      const int32x4_t sums_lo = Dot::dot(vdupq_n_s32(0), lo, vld1q_s8(a[c][b].qs));
      const int32x4_t sums_hi = Dot::dot(vdupq_n_s32(0), hi, vld1q_s8(a[c][b].qs + 16));
      const float32x4_t scale = vdupq_n_f32(w_scale * f16_to_f32(a[c][b].d));
      float32x4_t* l = lanes[c] + 2 * (b % 2);
      l[0] = vfmaq_f32(l[0], vcvtq_f32_s32(sums_lo), scale);
      l[1] = vfmaq_f32(l[1], vcvtq_f32_s32(sums_hi), scale);
    }
  }
  for (int c = 0; c < C; ++c) out[c] = sum_chains(lanes[c]);
}

// IQ4_XS: per super-block Σ_j (ls_j − 32) · Σ level · a exact in int32 (any order), then the
// twin's one float step. C tokens as lookup_rows.
template <class Dot, int C>
void iq4_xs_rows(int64_t k, const void* w_row, const void* const* a_rows, float* out) {
  const auto* w = static_cast<const BlockIq4Xs*>(w_row);
  const int8x16_t table = vld1q_s8(kIq4Levels);
  const BlockQ8_K* a[C];
  float sum[C];
  for (int c = 0; c < C; ++c) {
    a[c] = static_cast<const BlockQ8_K*>(a_rows[c]);
    sum[c] = 0.0f;
  }
  for (int64_t i = 0; i < k / kQKK; ++i) {
    int32x4_t sumi[C];
    for (int c = 0; c < C; ++c) sumi[c] = vdupq_n_s32(0);
    for (int j = 0; j < kQKK / kQK; ++j) {
      int8x16_t lo, hi;
      group_levels(w[i].qs + 16 * j, table, lo, hi);
      const int scale = iq4_xs_scale(w[i], j) - 32;
      for (int c = 0; c < C; ++c) {
        const int8_t* act = a[c][i].qs + kQK * j;
        const int32x4_t group =
            Dot::dot(Dot::dot(vdupq_n_s32(0), lo, vld1q_s8(act)), hi, vld1q_s8(act + 16));
        sumi[c] = vmlaq_n_s32(sumi[c], group, scale);
      }
    }
    const float d = f16_to_f32(w[i].d);
    for (int c = 0; c < C; ++c) sum[c] += (a[c][i].d * d) * static_cast<float>(vaddvq_s32(sumi[c]));
  }
  for (int c = 0; c < C; ++c) out[c] = sum[c];
}

// The IQ4 family's GEMV for a policy; nullptr for other types.
template <class Dot>
VecDotFn vec_dot_iq4(DType weight) {
  switch (weight) {
    case DType::IQ4_NL:
      return vec_dot_one_token<lookup_rows<Dot, BlockIq4Nl, 1>>;
    case DType::IQ4_XS:
      return vec_dot_one_token<iq4_xs_rows<Dot, 1>>;
    case DType::MXFP4:
      return vec_dot_one_token<lookup_rows<Dot, BlockMxfp4, 1>>;
    default:
      return nullptr;
  }
}

// Their GEMM tile: each block decoded once per group of kGroupTokens tokens.
template <class Dot>
GemmTileFn gemm_tile_iq4(DType weight) {
  switch (weight) {
    case DType::IQ4_NL:
      return gemm_tile_token_groups<lookup_rows<Dot, BlockIq4Nl, kGroupTokens>>;
    case DType::IQ4_XS:
      return gemm_tile_token_groups<iq4_xs_rows<Dot, kGroupTokens>>;
    case DType::MXFP4:
      return gemm_tile_token_groups<lookup_rows<Dot, BlockMxfp4, kGroupTokens>>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace tern::cpu
