// Scalar quantizers of the 32-element block types (Q4_0 … Q8_1) and the float row types, and
// the by-type dispatch of quantize_row.h. Scales are rounded to f16 first and the quants computed
// against the rounded scale, so dequantization sees the scale the quants were chosen for.
#include <algorithm>
#include <cmath>
#include <string>

#include "tern/blocks/block_layouts.h"
#include "tern/blocks/block_pack.h"
#include "tern/blocks/quantize_row.h"
#include "tern/blocks/quantize_row_impl.h"
#include "tern/core/error.h"
#include "tern/core/half.h"

namespace tern {
namespace {

// The value of largest magnitude in x[0..n) with its sign (the first one on ties).
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Symmetric 4/5-bit types: d = max / -2^(bits-1) maps the extreme value onto the side of the
// range with one more level, the remaining side clamps (as ggml does).
template <int kLevels>  // 16 or 32
void quantize_symmetric(const float* x, uint16_t* d_out, int* q) {
  const float max = signed_absmax(x, kQK);
  const uint16_t d16 = f32_to_f16(max / -static_cast<float>(kLevels / 2));
  const float d = f16_to_f32(d16);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = d16;
  for (int j = 0; j < kQK; ++j)
    q[j] = clamp_int(nearest_int(x[j] * id) + kLevels / 2, 0, kLevels - 1);
}

// Asymmetric types: x ≈ q * d + m with m the block minimum.
template <int kLevels>
void quantize_affine(const float* x, uint16_t* d_out, uint16_t* m_out, int* q) {
  float min = x[0], max = x[0];
  for (int j = 1; j < kQK; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const uint16_t d16 = f32_to_f16((max - min) / static_cast<float>(kLevels - 1));
  const uint16_t m16 = f32_to_f16(min);
  const float d = f16_to_f32(d16), m = f16_to_f32(m16);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = d16;
  *m_out = m16;
  for (int j = 0; j < kQK; ++j) q[j] = clamp_int(nearest_int((x[j] - m) * id), 0, kLevels - 1);
}

// Quants j and j + 16 of a block (j < 16), walking the 16 bytes: see generic/vec_dot.cpp on
// why the 32-element form is avoided.
int low_q4(const uint8_t* qs, int j) { return qs[j] & 0xf; }
int high_q4(const uint8_t* qs, int j) { return qs[j] >> 4; }
uint32_t high_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return bits;
}

void quantize_row_q4_0(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ4_0*>(vy);
  int q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i) {
    uint16_t d;
    quantize_symmetric<16>(x + i * kQK, &d, q);
    pack_q4_0(d, q, &y[i]);
  }
}
void dequantize_row_q4_0(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ4_0*>(vx);
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] = static_cast<float>(low_q4(x[i].qs, j) - 8) * d;
      y[i * kQK + j + 16] = static_cast<float>(high_q4(x[i].qs, j) - 8) * d;
    }
  }
}

void quantize_row_q4_1(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ4_1*>(vy);
  int q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i) {
    uint16_t d, m;
    quantize_affine<16>(x + i * kQK, &d, &m, q);
    pack_q4_1(d, m, q, &y[i]);
  }
}
void dequantize_row_q4_1(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ4_1*>(vx);
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d), m = f16_to_f32(x[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] = static_cast<float>(low_q4(x[i].qs, j)) * d + m;
      y[i * kQK + j + 16] = static_cast<float>(high_q4(x[i].qs, j)) * d + m;
    }
  }
}

void quantize_row_q5_0(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ5_0*>(vy);
  int q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i) {
    uint16_t d;
    quantize_symmetric<32>(x + i * kQK, &d, q);
    pack_q5_0(d, q, &y[i]);
  }
}
void dequantize_row_q5_0(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ5_0*>(vx);
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint32_t qh = high_bits(x[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] =
          static_cast<float>((low_q4(x[i].qs, j) | static_cast<int>((qh >> j) & 1) << 4) - 16) * d;
      y[i * kQK + j + 16] =
          static_cast<float>((high_q4(x[i].qs, j) | static_cast<int>((qh >> (j + 16)) & 1) << 4) -
                             16) *
          d;
    }
  }
}

void quantize_row_q5_1(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ5_1*>(vy);
  int q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i) {
    uint16_t d, m;
    quantize_affine<32>(x + i * kQK, &d, &m, q);
    pack_q5_1(d, m, q, &y[i]);
  }
}
void dequantize_row_q5_1(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ5_1*>(vx);
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d), m = f16_to_f32(x[i].m);
    const uint32_t qh = high_bits(x[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] = static_cast<float>(low_q4(x[i].qs, j) | ((qh >> j) & 1) << 4) * d + m;
      y[i * kQK + j + 16] =
          static_cast<float>(high_q4(x[i].qs, j) | ((qh >> (j + 16)) & 1) << 4) * d + m;
    }
  }
}

// Q8_0 and Q8_1: d = amax / 127, quants in [-127, 127]. Returns the sum of the quants.
int quantize_q8_block(const float* x, uint16_t* d_out, int8_t* qs) {
  const float amax = abs_max(x, kQK);
  const uint16_t d16 = f32_to_f16(amax / 127.0f);
  const float d = f16_to_f32(d16);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = d16;
  int sum = 0;
  for (int j = 0; j < kQK; ++j) {
    qs[j] = static_cast<int8_t>(clamp_int(nearest_int(x[j] * id), -127, 127));
    sum += qs[j];
  }
  return sum;
}

void quantize_row_q8_0(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t i = 0; i < k / kQK; ++i) quantize_q8_block(x + i * kQK, &y[i].d, y[i].qs);
}
void dequantize_row_q8_0(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[i * kQK + j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void quantize_row_q8_1(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ8_1*>(vy);
  for (int64_t i = 0; i < k / kQK; ++i) {
    const int sum = quantize_q8_block(x + i * kQK, &y[i].d, y[i].qs);
    y[i].s = f32_to_f16(f16_to_f32(y[i].d) * static_cast<float>(sum));
  }
}
void dequantize_row_q8_1(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ8_1*>(vx);
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[i * kQK + j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void quantize_row_f32(const float* x, void* y, int64_t k) { std::memcpy(y, x, k * sizeof(float)); }
void dequantize_row_f32(const void* x, float* y, int64_t k) {
  std::memcpy(y, x, k * sizeof(float));
}
// The 16-bit types are plain conversions, element by element (core/half.h: the CPU's own
// conversion instruction where it has one). Matmul activations do not come here: the CPU
// backend converts them with its SIMD rows (kernels/cpu/ops/row_ops.h), bit-identical to these.
void quantize_row_f16(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<uint16_t*>(vy);
  for (int64_t i = 0; i < k; ++i) y[i] = f32_to_f16(x[i]);
}
void dequantize_row_f16(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const uint16_t*>(vx);
  for (int64_t i = 0; i < k; ++i) y[i] = f16_to_f32(x[i]);
}
void quantize_row_bf16(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<uint16_t*>(vy);
  for (int64_t i = 0; i < k; ++i) y[i] = f32_to_bf16(x[i]);
}
void dequantize_row_bf16(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const uint16_t*>(vx);
  for (int64_t i = 0; i < k; ++i) y[i] = bf16_to_f32(x[i]);
}

QuantizeFn find_quantize(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return quantize_row_f32;
    case DType::F16:
      return quantize_row_f16;
    case DType::BF16:
      return quantize_row_bf16;
    case DType::Q4_0:
      return quantize_row_q4_0;
    case DType::Q4_1:
      return quantize_row_q4_1;
    case DType::Q5_0:
      return quantize_row_q5_0;
    case DType::Q5_1:
      return quantize_row_q5_1;
    case DType::Q8_0:
      return quantize_row_q8_0;
    case DType::Q8_1:
      return quantize_row_q8_1;
    case DType::Q2_K:
      return quantize_row_q2_k;
    case DType::Q3_K:
      return quantize_row_q3_k;
    case DType::Q4_K:
      return quantize_row_q4_k;
    case DType::Q5_K:
      return quantize_row_q5_k;
    case DType::Q6_K:
      return quantize_row_q6_k;
    case DType::Q8_K:
      return quantize_row_q8_k;
    case DType::IQ4_NL:
      return quantize_row_iq4_nl;
    case DType::IQ4_XS:
      return quantize_row_iq4_xs;
    case DType::MXFP4:
      return quantize_row_mxfp4;
    case DType::IQ3_XXS:
      return quantize_row_iq3_xxs;
    case DType::IQ3_S:
      return quantize_row_iq3_s;
    case DType::IQ2_XXS:
      return quantize_row_iq2_xxs;
    case DType::IQ2_XS:
      return quantize_row_iq2_xs;
    case DType::IQ2_S:
      return quantize_row_iq2_s;
    case DType::IQ1_S:
      return quantize_row_iq1_s;
    case DType::IQ1_M:
      return quantize_row_iq1_m;
    default:
      return affine_quantize_fn(dtype);
  }
}

DequantizeFn find_dequantize(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return dequantize_row_f32;
    case DType::F16:
      return dequantize_row_f16;
    case DType::BF16:
      return dequantize_row_bf16;
    case DType::Q4_0:
      return dequantize_row_q4_0;
    case DType::Q4_1:
      return dequantize_row_q4_1;
    case DType::Q5_0:
      return dequantize_row_q5_0;
    case DType::Q5_1:
      return dequantize_row_q5_1;
    case DType::Q8_0:
      return dequantize_row_q8_0;
    case DType::Q8_1:
      return dequantize_row_q8_1;
    case DType::Q2_K:
      return dequantize_row_q2_k;
    case DType::Q3_K:
      return dequantize_row_q3_k;
    case DType::Q4_K:
      return dequantize_row_q4_k;
    case DType::Q5_K:
      return dequantize_row_q5_k;
    case DType::Q6_K:
      return dequantize_row_q6_k;
    case DType::Q8_K:
      return dequantize_row_q8_k;
    case DType::IQ4_NL:
      return dequantize_row_iq4_nl;
    case DType::IQ4_XS:
      return dequantize_row_iq4_xs;
    case DType::MXFP4:
      return dequantize_row_mxfp4;
    case DType::IQ3_XXS:
      return dequantize_row_iq3_xxs;
    case DType::IQ3_S:
      return dequantize_row_iq3_s;
    case DType::IQ2_XXS:
      return dequantize_row_iq2_xxs;
    case DType::IQ2_XS:
      return dequantize_row_iq2_xs;
    case DType::IQ2_S:
      return dequantize_row_iq2_s;
    case DType::IQ1_S:
      return dequantize_row_iq1_s;
    case DType::IQ1_M:
      return dequantize_row_iq1_m;
    default:
      return affine_dequantize_fn(dtype);
  }
}

}  // namespace

void check_whole_blocks(DType dtype, int64_t k) {
  const int64_t block = dtype_traits(dtype).block_elems;
  if (k < 0 || k % block != 0)
    throw Error("row of " + std::to_string(k) + " elements is not a whole number of " +
                std::string(dtype_name(dtype)) + " blocks of " + std::to_string(block));
}

bool has_quantizer(DType dtype) { return find_quantize(dtype) != nullptr; }
bool has_dequantizer(DType dtype) { return find_dequantize(dtype) != nullptr; }

QuantizeFn quantize_fn(DType dtype) {
  if (QuantizeFn fn = find_quantize(dtype)) return fn;
  throw Error("no quantizer for type " + std::string(dtype_name(dtype)));
}
DequantizeFn dequantize_fn(DType dtype) {
  if (DequantizeFn fn = find_dequantize(dtype)) return fn;
  throw Error("no dequantizer for type " + std::string(dtype_name(dtype)));
}

void quantize_row(DType dtype, const float* x, void* y, int64_t k) {
  QuantizeFn fn = quantize_fn(dtype);
  check_whole_blocks(dtype, k);
  fn(x, y, k);
}

void dequantize_row(DType dtype, const void* x, float* y, int64_t k) {
  DequantizeFn fn = dequantize_fn(dtype);
  check_whole_blocks(dtype, k);
  fn(x, y, k);
}

}  // namespace tern
