// The 8-bit KV cache's dequantizers on the CPU: the per-head quantizer's error through them,
// and each ISA's dequantizer against its scalar twin (the format's own tests:
// blocks/kv_row_format_test.cpp).
#include "tern/kernels/cpu/kv/kv_quant.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "tern/core/error.h"
#include "tern/core/half.h"

namespace tern::cpu {
namespace {

// Codes of finite values: E4M3 has NaN at 0x7f/0xff only; E5M2 has inf and NaN at 0x7c-0x7f.
bool finite_code(KvDtype dtype, uint8_t code) {
  const uint8_t m = code & 0x7f;
  return dtype == KvDtype::Fp8E4M3 ? m != 0x7f : m < 0x7c;
}

TEST(KvQuant, HeadQuantizerScalesToTheLargestValue) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> x(72);
  for (float& v : x) v = dist(rng);
  x[5] = -9.5f;  // the largest magnitude
  std::vector<uint8_t> codes(x.size());
  uint16_t scale = 0;
  struct Case {
    KvDtype dtype;
    float top;
  };
  for (const Case& c : {Case{KvDtype::Int8, 127.0f}, Case{KvDtype::Fp8E4M3, 448.0f},
                        Case{KvDtype::Fp8E5M2, 57344.0f}}) {
    quantize_kv_head(c.dtype, x.data(), static_cast<int>(x.size()), codes.data(), &scale);
    EXPECT_EQ(scale, f32_to_f16(9.5f / c.top)) << kv_dtype_name(c.dtype);
    const float s = f16_to_f32(scale);
    std::vector<float> back(x.size());
    kv_dequantize_fn(c.dtype, Isa::Scalar)(codes.data(), s, back.data(),
                                           static_cast<int>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      if (c.dtype == KvDtype::Int8) {
        // Half a step, plus what the f16 scale's rounding moves the top of the range.
        ASSERT_LE(std::fabs(back[i] - x[i]), 0.5f * s + 1e-3f * std::fabs(x[i])) << i;
      } else {
        const float rel = c.dtype == KvDtype::Fp8E4M3 ? 1.0f / 16 : 1.0f / 8;  // half an ulp
        ASSERT_LE(std::fabs(back[i] - x[i]), rel * std::fabs(x[i]) * 1.001f + 1e-6f) << i;
      }
    }
  }
}

TEST(KvQuant, DequantizersMatchTheScalarTwinBitForBit) {
  std::mt19937 rng(11);
  std::vector<uint8_t> codes(200);
  for (KvDtype dtype : {KvDtype::Int8, KvDtype::Fp8E4M3, KvDtype::Fp8E5M2}) {
    for (uint8_t& c : codes) {
      do c = static_cast<uint8_t>(rng());
      while (dtype != KvDtype::Int8 && !finite_code(dtype, c));
    }
    const KvDequantizeFn scalar = kv_dequantize_fn(dtype, Isa::Scalar);
    for (Isa isa : testing::simd_levels()) {
      if (!isa_supported(isa)) continue;
      const KvDequantizeFn fn = kv_dequantize_fn(dtype, isa);
      for (int n : {1, 7, 8, 15, 16, 17, 64, 72, 128, 200}) {
        for (float scale : {1.0f, 0.0123f, 3.5e-5f, 60000.0f}) {
          std::vector<float> want(n), got(n);
          scalar(codes.data(), scale, want.data(), n);
          fn(codes.data(), scale, got.data(), n);
          for (int i = 0; i < n; ++i) {
            ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
                << kv_dtype_name(dtype) << " " << isa_name(isa) << " n " << n << " i " << i;
          }
        }
      }
    }
  }
  EXPECT_THROW(kv_dequantize_fn(KvDtype::F16, Isa::Scalar), Error);
}

}  // namespace
}  // namespace tern::cpu
