// The 16-chain arithmetic (generic/vec_dot_16lane.cpp) and the levels that keep it: x86's
// AVX-512 and AMX, every ARM level. Each of their kernels for the types it states gives its
// bits exactly, for every row length (chain wrap-arounds and tails included) — which is what
// makes a model's output on ARM equal its output on an AVX-512 x86 machine.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "tern/kernels/cpu/kernel_table.h"
#include "tern/kernels/cpu/vec_dot.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

constexpr DType kLanes16Types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,
                                   DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// The levels whose kernels for kLanes16Types are the 16-chain arithmetic.
bool keeps_lanes16(Isa isa) {
  return isa == Isa::Avx512 || isa == Isa::Amx || isa == Isa::Neon || isa == Isa::Dotprod ||
         isa == Isa::I8mm;
}

// Lanes16Case lengths: every block count from 1 to 40 (Q types) or 1 to 20 (K types) crosses the
// 4-block groups, the 16 chains' wrap-around and each short tail; the float types take
// lengths that end mid-chunk too.
std::vector<int64_t> lanes16_row_lengths(DType t) {
  std::vector<int64_t> ks;
  if (t == DType::F32 || t == DType::F16 || t == DType::BF16) {
    for (int64_t k = 1; k <= 300; k += 7) ks.push_back(k);
    for (int64_t k : {512, 1000, 2048, 4096 + 48}) ks.push_back(k);
    return ks;
  }
  const int64_t block = dtype_traits(t).block_elems, most = block == 32 ? 40 : 20;
  for (int64_t n = 1; n <= most; ++n) ks.push_back(n * block);
  return ks;
}

struct Lanes16Case {
  std::vector<uint8_t> w, a;
};

// A random weight row and activation row in the formats `kern` reads; sigma varies the scales.
Lanes16Case lanes16_case(const TypeKernels& kern, int64_t k, uint32_t seed, float sigma) {
  const std::vector<float> w = testing::gaussian(static_cast<size_t>(k), seed, sigma),
                           a = testing::gaussian(static_cast<size_t>(k), seed + 1);
  Lanes16Case row{testing::quantized(kern.weight, w),
                  std::vector<uint8_t>(*dtype_bytes(kern.activation, k))};
  kern.quantize_activation(a.data(), row.a.data(), k);
  return row;
}

TEST(VecDot16Lane, LevelsThatKeepItGiveItsBitsForEveryRowLength) {
  int levels = 0;
  for (Isa isa : testing::simd_levels()) {
    if (!keeps_lanes16(isa) || !isa_supported(isa)) continue;
    ++levels;
    for (DType t : kLanes16Types) {
      const KernelRow& row = kernel_row(t, isa);
      ASSERT_TRUE(keeps_lanes16(row.from))
          << dtype_name(t) << " on " << isa_name(isa) << " runs " << isa_name(row.from);
      const VecDotFn reference = lanes16_vec_dot(t);
      ASSERT_NE(reference, nullptr) << dtype_name(t);
      for (int64_t k : lanes16_row_lengths(t)) {
        for (float sigma : {1.0f, 1e-3f, 40.0f}) {
          const Lanes16Case r =
              lanes16_case(row.kernels, k, static_cast<uint32_t>(k * 3 + 17), sigma);
          const float want = reference(k, r.w.data(), r.a.data());
          const float got = row.kernels.vec_dot(k, r.w.data(), r.a.data());
          ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
              << dtype_name(t) << " on " << isa_name(isa) << " k=" << k << " sigma=" << sigma
              << ": " << got << " vs " << want;
        }
      }
    }
  }
  if (levels == 0) GTEST_SKIP() << "this CPU runs no level that keeps the 16-chain arithmetic";
}

// The reference computes the same dot as the scalar one, only with its own float order.
TEST(VecDot16Lane, AgreesWithTheScalarDotToRounding) {
  for (DType t : kLanes16Types) {
    const TypeKernels& kern = type_kernels(t, Isa::Scalar);
    for (int64_t k : lanes16_row_lengths(t)) {
      const Lanes16Case r = lanes16_case(kern, k, static_cast<uint32_t>(k + 5), 1.0f);
      const float scalar = kern.vec_dot(k, r.w.data(), r.a.data());
      const float lanes = lanes16_vec_dot(t)(k, r.w.data(), r.a.data());
      EXPECT_NEAR(lanes, scalar, 1e-4 * (std::fabs(scalar) + std::sqrt(static_cast<double>(k))))
          << dtype_name(t) << " k=" << k;
    }
  }
}

TEST(VecDot16Lane, CoversExactlyTheTypesItStates) {
  for (int t = 0; t < kNumDTypes; ++t) {
    const auto type = static_cast<DType>(t);
    bool stated = false;
    for (DType s : kLanes16Types) stated = stated || s == type;
    EXPECT_EQ(lanes16_vec_dot(type) != nullptr, stated) << dtype_name(type);
  }
}

}  // namespace
}  // namespace tern::cpu
