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
