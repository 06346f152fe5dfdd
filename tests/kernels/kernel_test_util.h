// Helpers of the kernel tests: seeded Gaussian data, quantized rows, error measures.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tern/blocks/quantize_row.h"
#include "tern/core/dtype.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::testing {

// This build's ISA levels above Scalar (x86-64's or aarch64's), whether or not this CPU runs
// them: tests skip the ones it does not.
inline std::vector<cpu::Isa> simd_levels() {
  const std::vector<cpu::Isa>& all = cpu::isa_levels();
  return {all.begin() + 1, all.end()};
}

inline std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<uint8_t> quantized(DType dtype, const std::vector<float>& x) {
  std::vector<uint8_t> q(*dtype_bytes(dtype, x.size()));
  quantize_row(dtype, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

inline std::vector<float> dequantized(DType dtype, const void* q, int64_t k) {
  std::vector<float> y(static_cast<size_t>(k));
  dequantize_row(dtype, q, y.data(), k);
  return y;
}

// `k` elements (whole super-blocks) of an IQ3, IQ2 or IQ1 type, the types tern reads but does
// not write: random bytes (every grid index, sign and scale pattern) under finite f16 scales d
// (each block's first 2 bytes; IQ1_M's the top nibbles of its last 8) of about 1/400, so a dot
// stays near a quantized row's size.
inline std::vector<uint8_t> random_blocks(DType dtype, int64_t k, uint32_t seed) {
  const DTypeTraits& t = dtype_traits(dtype);
  std::vector<uint8_t> out(static_cast<size_t>(k / t.block_elems * t.block_bytes));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : out) b = static_cast<uint8_t>(byte(rng));
  for (size_t i = 0; i < out.size(); i += static_cast<size_t>(t.block_bytes)) {
    // f16 0x1800..0x1bff (2^-9 ≤ d < 2^-8), either sign.
    if (dtype == DType::IQ1_M) {  // d's top byte: nibble 3 in byte 55, nibble 2 in byte 53
      out[i + 55] = static_cast<uint8_t>((out[i + 55] & 0x8f) | 0x10);
      out[i + 53] = static_cast<uint8_t>((out[i + 53] & 0x3f) | 0x80);
      continue;
    }
    out[i + 1] = static_cast<uint8_t>(0x18 | (out[i + 1] & 0x03) | (out[i + 1] & 0x80));
  }
  return out;
}

// ‖a - b‖ / ‖b‖
inline double relative_rms_error(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    ref += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(err / ref);
}

}  // namespace tern::testing
