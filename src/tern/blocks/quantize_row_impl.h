// Per-type row quantizers shared by quantize_q.cpp (32-element and float types, and the
// by-type dispatch) and quantize_k.cpp (256-element K types). Internal to blocks/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tern/blocks/quantize_row.h"

namespace tern {

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves the rounded integer
// in the low mantissa bits. Independent of the FP rounding mode and of libm.
inline int nearest_int(float v) {
  float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// max |x[j]| over n elements (n a multiple of 16), NaNs passed over. In 16 lanes of a vector
// type, each lane's running max then the lanes': a max is the same in any order, and a single
// running std::max the compiler keeps scalar and in order (that loop was half of
// quantize_row_q8_k, itself 4% of a Q4_K_M prefill).
inline float abs_max(const float* x, int n) {
  using Lanes = float __attribute__((vector_size(64)));
  using Bits = uint32_t __attribute__((vector_size(64)));
  Lanes lanes = {};
  for (int j = 0; j < n; j += 16) {
    Bits bits;
    std::memcpy(&bits, x + j, sizeof bits);
    const auto v = reinterpret_cast<Lanes>(bits & 0x7fffffffu);  // |x|
    lanes = lanes < v ? v : lanes;                               // std::max(lanes, v), lane by lane
  }
  float amax = 0.0f;
  for (int l = 0; l < 16; ++l) amax = std::max(amax, lanes[l]);
  return amax;
}

// The INT*_G* types (quantize_affine.cpp); nullptr for other types.
QuantizeFn affine_quantize_fn(DType dtype);
DequantizeFn affine_dequantize_fn(DType dtype);

void quantize_row_q2_k(const float* x, void* y, int64_t k);
void quantize_row_q3_k(const float* x, void* y, int64_t k);
void quantize_row_q4_k(const float* x, void* y, int64_t k);
void quantize_row_q5_k(const float* x, void* y, int64_t k);
void quantize_row_q6_k(const float* x, void* y, int64_t k);
void quantize_row_q8_k(const float* x, void* y, int64_t k);
void dequantize_row_q2_k(const void* x, float* y, int64_t k);
void dequantize_row_q3_k(const void* x, float* y, int64_t k);
void dequantize_row_q4_k(const void* x, float* y, int64_t k);
void dequantize_row_q5_k(const void* x, float* y, int64_t k);
void dequantize_row_q6_k(const void* x, float* y, int64_t k);
void dequantize_row_q8_k(const void* x, float* y, int64_t k);
void quantize_row_iq4_nl(const float* x, void* y, int64_t k);
void quantize_row_iq4_xs(const float* x, void* y, int64_t k);
void dequantize_row_iq4_nl(const void* x, float* y, int64_t k);
void dequantize_row_iq4_xs(const void* x, float* y, int64_t k);
void quantize_row_mxfp4(const float* x, void* y, int64_t k);
void dequantize_row_mxfp4(const void* x, float* y, int64_t k);
void quantize_row_iq3_xxs(const float* x, void* y, int64_t k);
void quantize_row_iq3_s(const float* x, void* y, int64_t k);
void quantize_row_iq2_xxs(const float* x, void* y, int64_t k);
void quantize_row_iq2_xs(const float* x, void* y, int64_t k);
void quantize_row_iq2_s(const float* x, void* y, int64_t k);
void quantize_row_iq1_s(const float* x, void* y, int64_t k);
void quantize_row_iq1_m(const float* x, void* y, int64_t k);
void dequantize_row_iq3_xxs(const void* x, float* y, int64_t k);
void dequantize_row_iq3_s(const void* x, float* y, int64_t k);
void dequantize_row_iq2_xxs(const void* x, float* y, int64_t k);
void dequantize_row_iq2_xs(const void* x, float* y, int64_t k);
void dequantize_row_iq2_s(const void* x, float* y, int64_t k);
void dequantize_row_iq1_s(const void* x, float* y, int64_t k);
void dequantize_row_iq1_m(const void* x, float* y, int64_t k);

}  // namespace tern
