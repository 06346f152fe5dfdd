// F32, F16 (f32 activations) and BF16 on NEON, in the arithmetic of the AVX-512 level
// (generic/vec_dot_16lane.cpp states it): 16-lane accumulators as four float32x4 each, fed by
// fused multiply-adds in the same chunk order, zeros past the row's end, the same tree at the
// end. F16 weights widen exactly (fcvtl), so the products are those of the f32 values; bf16
// values widen by a shift, and each lane takes its pair's odd product, then its even one, as
// vdpbf16ps does (without its flush of subnormals to zero).
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "tern/kernels/cpu/arch/arm/lanes16_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

struct Acc16 {
  float32x4_t r[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
};

Acc16 add(const Acc16& x, const Acc16& y) {
  Acc16 s;
  for (int q = 0; q < 4; ++q) s.r[q] = vaddq_f32(x.r[q], y.r[q]);
  return s;
}

// 16 weights as floats, from f32 or f16.
inline void load16(const float* w, float32x4_t out[4]) {
  for (int q = 0; q < 4; ++q) out[q] = vld1q_f32(w + 4 * q);
}
inline void load16(const uint16_t* w, float32x4_t out[4]) {
  for (int q = 0; q < 4; ++q) out[q] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w + 4 * q)));
}

// The 16-element chunk at w, a into acc; n < 16 elements when short, the rest zeros.
template <class Elem>
inline void fma_chunk(Acc16& acc, const Elem* w, const float* a, int64_t n = 16) {
  float32x4_t wv[4], av[4];
  if (n == 16) {
    load16(w, wv);
    for (int q = 0; q < 4; ++q) av[q] = vld1q_f32(a + 4 * q);
  } else {
    Elem wt[16] = {};
    float at[16] = {};
    std::memcpy(wt, w, static_cast<size_t>(n) * sizeof(Elem));
    std::memcpy(at, a, static_cast<size_t>(n) * sizeof(float));
    load16(wt, wv);
    for (int q = 0; q < 4; ++q) av[q] = vld1q_f32(at + 4 * q);
  }
  for (int q = 0; q < 4; ++q) acc.r[q] = vfmaq_f32(acc.r[q], wv[q], av[q]);
}

float dot_f32(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const float*>(vw);
  const auto* a = static_cast<const float*>(va);
  Acc16 acc[4];
  int64_t i = 0;
  for (; i + 64 <= k; i += 64)
    for (int c = 0; c < 4; ++c) fma_chunk(acc[c], w + i + 16 * c, a + i + 16 * c);
  for (; i + 16 <= k; i += 16) fma_chunk(acc[0], w + i, a + i);
  if (i < k) fma_chunk(acc[1], w + i, a + i, k - i);
  return sum_chains(add(add(acc[0], acc[1]), add(acc[2], acc[3])).r);
}

float dot_f16(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const float*>(va);
  Acc16 acc[2];
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    fma_chunk(acc[0], w + i, a + i);
    fma_chunk(acc[1], w + i + 16, a + i + 16);
  }
  if (i < k) fma_chunk(acc[0], w + i, a + i, k - i < 16 ? k - i : 16);
  if (i + 16 < k) fma_chunk(acc[1], w + i + 16, a + i + 16, k - i - 16);
  return sum_chains(add(acc[0], acc[1]).r);
}

// Elements 8q .. 8q + 7 of a bf16 chunk as f32: the even ones (lanes 2l) and the odd ones.
inline void load_bf16_pairs(const uint16_t* p, float32x4_t& even, float32x4_t& odd) {
  const uint16x4x2_t pairs = vld2_u16(p);
  even = vreinterpretq_f32_u32(vshll_n_u16(pairs.val[0], 16));
  odd = vreinterpretq_f32_u32(vshll_n_u16(pairs.val[1], 16));
}

// The 32-element bf16 chunk at w, a into acc; n < 32 elements when short, the rest zeros.
inline void fma_bf16_chunk(Acc16& acc, const uint16_t* w, const uint16_t* a, int64_t n = 32) {
  uint16_t wt[32] = {}, at[32] = {};
  if (n < 32) {
    std::memcpy(wt, w, static_cast<size_t>(n) * sizeof(uint16_t));
    std::memcpy(at, a, static_cast<size_t>(n) * sizeof(uint16_t));
    w = wt, a = at;
  }
  for (int q = 0; q < 4; ++q) {
    float32x4_t w_even, w_odd, a_even, a_odd;
    load_bf16_pairs(w + 8 * q, w_even, w_odd);
    load_bf16_pairs(a + 8 * q, a_even, a_odd);
    acc.r[q] = vfmaq_f32(vfmaq_f32(acc.r[q], w_odd, a_odd), w_even, a_even);
  }
}

float dot_bf16(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const uint16_t*>(va);
  Acc16 acc[4];
  int64_t i = 0;
  for (; i + 128 <= k; i += 128)
    for (int c = 0; c < 4; ++c) fma_bf16_chunk(acc[c], w + i + 32 * c, a + i + 32 * c);
  for (; i + 32 <= k; i += 32) fma_bf16_chunk(acc[0], w + i, a + i);
  if (i < k) fma_bf16_chunk(acc[1], w + i, a + i, k - i);
  return sum_chains(add(add(acc[0], acc[1]), add(acc[2], acc[3])).r);
}

}  // namespace

VecDotFn neon_vec_dot_float(DType weight) {
  switch (weight) {
    case DType::F32:
      return dot_f32;
    case DType::F16:
      return dot_f16;
    case DType::BF16:
      return dot_bf16;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
