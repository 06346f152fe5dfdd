// Per-type row quantizers shared by quantize_q.cpp (32-element and float types, and the
// by-type dispatch) and quantize_k.cpp (256-element K types). Internal to tern::cpu.
#pragma once

#include <cstdint>
#include <cstring>

namespace tern::cpu {

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves the rounded integer
// in the low mantissa bits. Independent of the FP rounding mode and of libm.
inline int nearest_int(float v) {
  float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

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

}  // namespace tern::cpu
