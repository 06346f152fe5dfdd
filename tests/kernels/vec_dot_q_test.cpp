// The SIMD dot kernels of Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, for every ISA this CPU runs, against
// the scalar reference (generic/vec_dot.cpp) and a reference computed here in double from the
// block layout formulas (blocks/block_layouts.h): random rows of several lengths, and hand-built
// extreme blocks whose result is an exact integer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "tern/blocks/block_layouts.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/vec_dot.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

template <class W>
constexpr bool kHasMin = requires(W w) {
  w.m;
};
template <class W>
constexpr bool kHasQh = requires(W w) {
  w.qh;
};
template <class W>
constexpr bool kIsQ8 = std::is_same_v<W, BlockQ8_0>;
template <class W>
using ActOf = std::conditional_t<kHasMin<W>, BlockQ8_1, BlockQ8_0>;

template <class W>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<W, BlockQ4_0>) return DType::Q4_0;
  if constexpr (std::is_same_v<W, BlockQ4_1>) return DType::Q4_1;
  if constexpr (std::is_same_v<W, BlockQ5_0>) return DType::Q5_0;
  if constexpr (std::is_same_v<W, BlockQ5_1>) return DType::Q5_1;
  return DType::Q8_0;
}

// Element j of a weight block as the integer its scale multiplies (offset already removed).
template <class W>
int weight_value(const W& w, int j) {
  if constexpr (kIsQ8<W>) {
    return w.qs[j];
  } else {
    int q = j < 16 ? (w.qs[j] & 15) : (w.qs[j - 16] >> 4);
    int offset = 8;
    if constexpr (kHasQh<W>) {
      q |= ((w.qh[j / 8] >> (j % 8)) & 1) << 4;
      offset = 16;
    }
    return kHasMin<W> ? q : q - offset;
  }
}

struct Expected {
  double value = 0;
  double magnitude = 0;  // sum of |term|, what float rounding errors scale with
};

template <class W>
Expected reference(const std::vector<W>& w, const std::vector<ActOf<W>>& a) {
  Expected e;
  for (size_t b = 0; b < w.size(); ++b) {
    int64_t isum = 0, iabs = 0;
    for (int j = 0; j < kQK; ++j) {
      const int64_t p = int64_t{weight_value(w[b], j)} * a[b].qs[j];
      isum += p;
      iabs += p < 0 ? -p : p;
    }
    const double scale = double{f16_to_f32(w[b].d)} * f16_to_f32(a[b].d);
    e.value += scale * static_cast<double>(isum);
    e.magnitude += std::abs(scale) * static_cast<double>(iabs);
    if constexpr (kHasMin<W>) {
      const double ms = double{f16_to_f32(w[b].m)} * f16_to_f32(a[b].s);
      e.value += ms;
      e.magnitude += std::abs(ms);
    }
  }
  return e;
}

struct IsaKernel {
  std::string name;
  VecDotFn fn;
};

// The kernels of `weight` for every SIMD level this CPU runs (a level without its own for the
// type runs its parent's).
std::vector<IsaKernel> simd_kernels(DType weight) {
  std::vector<IsaKernel> out;
  for (Isa isa : testing::simd_levels())
    if (isa_supported(isa)) out.push_back({isa_name(isa), type_kernels(weight, isa).vec_dot});
  return out;
}

template <class W>
void fill_random_weights(std::vector<W>& w, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (W& blk : w) {
    blk.d = f32_to_f16(scale(rng));
    if constexpr (kHasMin<W>) blk.m = f32_to_f16(scale(rng));
    if constexpr (kHasQh<W>) {
      for (auto& h : blk.qh) h = static_cast<uint8_t>(byte(rng));
    }
    for (auto& q : blk.qs) q = static_cast<std::remove_reference_t<decltype(q)>>(byte(rng));
  }
}

// Activation qs over the whole int8 range; s = d * sum(qs) as the Q8_1 quantizer stores it.
template <class A>
void fill_random_activations(std::vector<A>& a, std::mt19937& rng) {
  std::uniform_int_distribution<int> value(-128, 127);
  std::uniform_real_distribution<float> scale(0.0f, 0.02f);
  for (A& blk : a) {
    blk.d = f32_to_f16(scale(rng));
    int sum = 0;
    for (auto& q : blk.qs) {
      q = static_cast<int8_t>(value(rng));
      sum += q;
    }
    if constexpr (std::is_same_v<A, BlockQ8_1>)
      blk.s = f32_to_f16(f16_to_f32(blk.d) * static_cast<float>(sum));
  }
}

template <class W>
class VecDotQTest : public ::testing::Test {};
using BlockTypes = ::testing::Types<BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0>;
TYPED_TEST_SUITE(VecDotQTest, BlockTypes);

#if defined(__x86_64__)
TYPED_TEST(VecDotQTest, EveryIsaHasTheKernelAndDispatchPicksIt) {
  const DType type = dtype_of<TypeParam>();
  for (const IsaKernel& isa : simd_kernels(type)) EXPECT_NE(isa.fn, nullptr) << isa.name;
  if (isa_supported(Isa::Avx2)) {
    EXPECT_EQ(type_kernels(type, Isa::Avx2).vec_dot, avx2_vec_dot_q(type));
  }
  const VecDotFn amx = chains16_vec_dot_q(type);
  const bool shared = amx != nullptr;  // Q4_0 and Q8_0: one arithmetic on both AVX-512 levels
  EXPECT_EQ(shared, type == DType::Q4_0 || type == DType::Q8_0);
  if (isa_supported(Isa::Avx512)) {
    const TypeKernels& kern = type_kernels(type, Isa::Avx512);
    EXPECT_EQ(kern.vec_dot, shared ? amx : avx512_vec_dot_q(type));
    EXPECT_EQ(kern.gemm, chains16_gemm_q(type));
    EXPECT_EQ(kern.packed, chains16_packed_q(type));
    EXPECT_EQ(kern.gemm_tile, shared ? nullptr : avx512_gemm_tile_q(type));
  }
  if (isa_supported(Isa::Amx)) {
    const TypeKernels& kern = type_kernels(type, Isa::Amx);
    EXPECT_EQ(kern.vec_dot, shared ? amx : avx512_vec_dot_q(type));
    EXPECT_EQ(kern.gemm, amx_gemm_q(type));
    EXPECT_EQ(kern.packed, amx_packed_q(type));
  }
}
#endif

TYPED_TEST(VecDotQTest, RandomRowsMatchTheReference) {
  using W = TypeParam;
  std::mt19937 rng(1234);
  // Lengths exercise rows shorter than a group of blocks, whole groups, and groups plus tails.
  for (int64_t k : {32, 64, 96, 544, 736, 4096, 4128}) {
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<W> w(k / kQK);
      std::vector<ActOf<W>> a(k / kQK);
      fill_random_weights(w, rng);
      fill_random_activations(a, rng);
      const Expected e = reference(w, a);
      const float scalar = scalar_vec_dot(dtype_of<W>())(k, w.data(), a.data());
      EXPECT_NEAR(scalar, e.value, 1e-5 * e.magnitude + 1e-30)
          << "scalar k=" << k << " trial " << trial;
      for (const IsaKernel& isa : simd_kernels(dtype_of<W>())) {
        const float got = isa.fn(k, w.data(), a.data());
        EXPECT_NEAR(got, e.value, 1e-5 * e.magnitude + 1e-30)
            << isa.name << " k=" << k << " trial " << trial;
        EXPECT_NEAR(got, scalar, 2e-5 * e.magnitude + 1e-30)
            << isa.name << " vs scalar, k=" << k << " trial " << trial;
      }
    }
  }
}

// Unit scales make every block's integer dot, and every partial sum, an integer below 2^24,
// so any order of float additions gives the exact value: any lost bit of an integer dot fails.
template <class W>
void check_exact(const std::vector<W>& w, const std::vector<ActOf<W>>& a, const std::string& what) {
  const Expected e = reference(w, a);
  ASSERT_LT(e.magnitude, 16777216.0) << what;
  const int64_t k = static_cast<int64_t>(w.size()) * kQK;
  EXPECT_EQ(scalar_vec_dot(dtype_of<W>())(k, w.data(), a.data()), static_cast<float>(e.value))
      << "scalar " << what;
  for (const IsaKernel& isa : simd_kernels(dtype_of<W>())) {
    EXPECT_EQ(isa.fn(k, w.data(), a.data()), static_cast<float>(e.value))
        << isa.name << " " << what << " k=" << k;
  }
}

TYPED_TEST(VecDotQTest, ExtremeBlocksAreExact) {
  using W = TypeParam;
  using A = ActOf<W>;
  const uint16_t one = f32_to_f16(1.0f);
  // Weight patterns: every quant at its minimum, at its maximum, and alternating per element.
  struct WeightPattern {
    const char* name;
    uint8_t qs;  // the byte for 4/5-bit types; Q8_0 uses it as int8
    uint8_t qh;
  };
  const WeightPattern weights[] = {{"w-min", 0x00, 0x00},
                                   {"w-max", 0xFF, 0xFF},
                                   {"w-mixed", 0xF0, 0x55},
                                   {"w-q8-min", 0x80, 0xAA},
                                   {"w-q8-max", 0x7F, 0x33}};
  const int activations[][2] = {{127, 127}, {-128, -128}, {127, -128}, {-128, 127}};
  for (int64_t k : {32, 96, 544}) {
    for (const WeightPattern& wp : weights) {
      for (const auto& ap : activations) {
        std::vector<W> w(k / kQK);
        std::vector<A> a(k / kQK);
        for (size_t b = 0; b < w.size(); ++b) {
          w[b].d = one;
          if constexpr (kHasMin<W>) w[b].m = f32_to_f16(b % 2 ? -1.0f : 1.0f);
          if constexpr (kHasQh<W>) std::memset(w[b].qh, wp.qh, sizeof w[b].qh);
          std::memset(w[b].qs, wp.qs, sizeof w[b].qs);
          a[b].d = one;
          int sum = 0;
          for (int j = 0; j < kQK; ++j) {
            a[b].qs[j] = static_cast<int8_t>(ap[j % 2]);
            sum += a[b].qs[j];
          }
          if constexpr (std::is_same_v<A, BlockQ8_1>) a[b].s = f32_to_f16(static_cast<float>(sum));
        }
        check_exact(
            w, a,
            std::string(wp.name) + " a=" + std::to_string(ap[0]) + "/" + std::to_string(ap[1]));
      }
    }
  }
}

TYPED_TEST(VecDotQTest, RandomIntegersWithUnitScalesAreExact) {
  using W = TypeParam;
  std::mt19937 rng(99);
  for (int64_t k : {32, 544, 736}) {
    std::vector<W> w(k / kQK);
    std::vector<ActOf<W>> a(k / kQK);
    fill_random_weights(w, rng);
    fill_random_activations(a, rng);
    for (auto& blk : w) blk.d = f32_to_f16(1.0f);
    for (auto& blk : a) blk.d = f32_to_f16(1.0f);
    if constexpr (kHasMin<W>) {
      for (size_t b = 0; b < w.size(); ++b) {
        w[b].m = f32_to_f16(static_cast<float>(static_cast<int>(b % 5) - 2));
        int sum = 0;
        for (int8_t q : a[b].qs) sum += q;
        a[b].s = f32_to_f16(static_cast<float>(sum));
      }
    }
    check_exact(w, a, "random");
  }
}

TYPED_TEST(VecDotQTest, ZeroScalesGiveZero) {
  using W = TypeParam;
  std::mt19937 rng(7);
  for (int64_t k : {32, 544}) {
    std::vector<W> w(k / kQK);
    std::vector<ActOf<W>> a(k / kQK);
    fill_random_weights(w, rng);
    fill_random_activations(a, rng);
    for (auto& blk : w) {
      blk.d = 0;
      if constexpr (kHasMin<W>) blk.m = 0;
    }
    for (const IsaKernel& isa : simd_kernels(dtype_of<W>()))
      EXPECT_EQ(isa.fn(k, w.data(), a.data()), 0.0f) << isa.name;
  }
}

#if defined(__x86_64__)
TEST(VecDotQ, OtherTypesAreNotThisFamilys) {
  for (DType t : {DType::F32, DType::F16, DType::Q4_K, DType::Q6_K, DType::Q8_1}) {
    EXPECT_EQ(avx2_vec_dot_q(t), nullptr);
    EXPECT_EQ(avx512_vec_dot_q(t), nullptr);
  }
}
#endif

}  // namespace
}  // namespace tern::cpu
