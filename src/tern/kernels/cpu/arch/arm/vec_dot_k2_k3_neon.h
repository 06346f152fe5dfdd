// Q2_K and Q3_K on ARM, bit for bit the scalar twins of generic/vec_dot.cpp (per super-block an
// exact int32 sum, in any order, then the twin's float step), for either integer-dot policy:
// neon/vec_dot_k2_k3.cpp and dotprod/vec_dot_k2_k3.cpp instantiate it. A policy's lanes only
// need to add up to the dot of its 16 pairs here. The GEMV and the GEMM tile run the same
// micro-kernels (one token, or a group of kGroupTokens), so the tile is the GEMV's bits.
#pragma once

#include <arm_neon.h>

#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/arch/arm/token_group_tile_neon.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {
namespace {

// Both types keep element 128 h + 32 g + r's two low bits at bits 2g of qs[32 h + r]: sub-block
// j (16 elements) is half (j % 2) of the 32 bytes of h = j / 8 at g = (j % 8) / 2.
inline int8x16_t two_bits(const uint8_t* qs, int j) {
  const uint8x16_t bytes = vld1q_u8(qs + 32 * (j / 8) + 16 * (j % 2));
  const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * ((j % 8) / 2)));
  return vreinterpretq_s8_u8(vandq_u8(vshlq_u8(bytes, shift), vdupq_n_u8(3)));
}

// Q2_K: Σ_j (scale_j & 15) · Σ q · a and Σ_j (scale_j >> 4) · bsum_j, then the twin's step, for
// C tokens a_rows[c]: each sub-block's bits and scales decoded once for all of them.
template <class Dot, int C>
void q2_k_rows(int64_t k, const void* w_row, const void* const* a_rows, float* out) {
  const auto* w = static_cast<const BlockQ2_K*>(w_row);
  const BlockQ8_K* a[C];
  float sum[C];
  for (int c = 0; c < C; ++c) {
    a[c] = static_cast<const BlockQ8_K*>(a_rows[c]);
    sum[c] = 0.0f;
  }
  for (int64_t i = 0; i < k / kQKK; ++i) {
    int32x4_t sumi[C];
    int summ[C];
    for (int c = 0; c < C; ++c) {
      sumi[c] = vdupq_n_s32(0);
      summ[c] = 0;
    }
    for (int j = 0; j < 16; ++j) {
      const int8x16_t q = two_bits(w[i].qs, j);
      const int scale = w[i].scales[j] & 0xf, min_scale = w[i].scales[j] >> 4;
      for (int c = 0; c < C; ++c) {
        const int32x4_t dot = Dot::dot(vdupq_n_s32(0), q, vld1q_s8(a[c][i].qs + 16 * j));
        sumi[c] = vmlaq_n_s32(sumi[c], dot, scale);
        summ[c] += min_scale * a[c][i].bsums[j];
      }
    }
    const float d = f16_to_f32(w[i].d), dmin = f16_to_f32(w[i].dmin);
    for (int c = 0; c < C; ++c)
      sum[c] += (a[c][i].d * d) * static_cast<float>(vaddvq_s32(sumi[c])) -
                (a[c][i].d * dmin) * static_cast<float>(summ[c]);
  }
  for (int c = 0; c < C; ++c) out[c] = sum[c];
}

// Q3_K: q = two bits − 4 where the hmask bit (4 h + g of hmask[r]) is clear; 6-bit scales
// biased by 32. C tokens as q2_k_rows.
template <class Dot, int C>
void q3_k_rows(int64_t k, const void* w_row, const void* const* a_rows, float* out) {
  const auto* w = static_cast<const BlockQ3_K*>(w_row);
  const BlockQ8_K* a[C];
  float sum[C];
  for (int c = 0; c < C; ++c) {
    a[c] = static_cast<const BlockQ8_K*>(a_rows[c]);
    sum[c] = 0.0f;
  }
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const uint8_t* s = w[i].scales;
    int32x4_t sumi[C];
    for (int c = 0; c < C; ++c) sumi[c] = vdupq_n_s32(0);
    for (int j = 0; j < 16; ++j) {
      const int h = j / 8, g = (j % 8) / 2;
      const uint8x16_t mask = vld1q_u8(w[i].hmask + 16 * (j % 2));
      const uint8x16_t high =
          vandq_u8(vshlq_u8(mask, vdupq_n_s8(static_cast<int8_t>(-(4 * h + g)))), vdupq_n_u8(1));
      // two bits − 4 + 4 · high
      const int8x16_t q = vsubq_s8(
          vaddq_s8(two_bits(w[i].qs, j), vreinterpretq_s8_u8(vshlq_n_u8(high, 2))), vdupq_n_s8(4));
      const int low = j < 8 ? s[j] & 0xf : s[j - 8] >> 4;
      const int scale = (low | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
      for (int c = 0; c < C; ++c)
        sumi[c] =
            vmlaq_n_s32(sumi[c], Dot::dot(vdupq_n_s32(0), q, vld1q_s8(a[c][i].qs + 16 * j)), scale);
    }
    const float d = f16_to_f32(w[i].d);
    for (int c = 0; c < C; ++c) sum[c] += (a[c][i].d * d) * static_cast<float>(vaddvq_s32(sumi[c]));
  }
  for (int c = 0; c < C; ++c) out[c] = sum[c];
}

// The two types' GEMV for a policy; nullptr for other types.
template <class Dot>
VecDotFn vec_dot_k2_k3(DType weight) {
  switch (weight) {
    case DType::Q2_K:
      return vec_dot_one_token<q2_k_rows<Dot, 1>>;
    case DType::Q3_K:
      return vec_dot_one_token<q3_k_rows<Dot, 1>>;
    default:
      return nullptr;
  }
}

// Their GEMM tile: each super-block decoded once per group of kGroupTokens tokens.
template <class Dot>
GemmTileFn gemm_tile_k2_k3(DType weight) {
  switch (weight) {
    case DType::Q2_K:
      return gemm_tile_token_groups<q2_k_rows<Dot, kGroupTokens>>;
    case DType::Q3_K:
      return gemm_tile_token_groups<q3_k_rows<Dot, kGroupTokens>>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace tern::cpu
