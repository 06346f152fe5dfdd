// Q2_K and Q3_K on ARM, bit for bit the scalar twins of generic/vec_dot.cpp (per super-block an
// exact int32 sum, in any order, then the twin's float step), for either integer-dot policy:
// neon/vec_dot_k2_k3.cpp and dotprod/vec_dot_k2_k3.cpp instantiate it. A policy's lanes only
// need to add up to the dot of its 16 pairs here.
#pragma once

#include <arm_neon.h>

#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/core/half.h"
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

// Q2_K: Σ_j (scale_j & 15) · Σ q · a and Σ_j (scale_j >> 4) · bsum_j, then the twin's step.
template <class Dot>
float dot_q2_k(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockQ2_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    int32x4_t sumi = vdupq_n_s32(0);
    int summ = 0;
    for (int j = 0; j < 16; ++j) {
      const int32x4_t dot =
          Dot::dot(vdupq_n_s32(0), two_bits(w[i].qs, j), vld1q_s8(a[i].qs + 16 * j));
      sumi = vmlaq_n_s32(sumi, dot, w[i].scales[j] & 0xf);
      summ += (w[i].scales[j] >> 4) * a[i].bsums[j];
    }
    sum += (a[i].d * f16_to_f32(w[i].d)) * static_cast<float>(vaddvq_s32(sumi)) -
           (a[i].d * f16_to_f32(w[i].dmin)) * static_cast<float>(summ);
  }
  return sum;
}

// Q3_K: q = two bits − 4 where the hmask bit (4 h + g of hmask[r]) is clear; 6-bit scales
// biased by 32.
template <class Dot>
float dot_q3_k(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockQ3_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const uint8_t* s = w[i].scales;
    int32x4_t sumi = vdupq_n_s32(0);
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
      sumi = vmlaq_n_s32(sumi, Dot::dot(vdupq_n_s32(0), q, vld1q_s8(a[i].qs + 16 * j)), scale);
    }
    sum += (a[i].d * f16_to_f32(w[i].d)) * static_cast<float>(vaddvq_s32(sumi));
  }
  return sum;
}

// The two types' GEMV for a policy; nullptr for other types.
template <class Dot>
VecDotFn vec_dot_k2_k3(DType weight) {
  switch (weight) {
    case DType::Q2_K:
      return dot_q2_k<Dot>;
    case DType::Q3_K:
      return dot_q3_k<Dot>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace tern::cpu
