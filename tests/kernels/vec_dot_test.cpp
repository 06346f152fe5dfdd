// Dot kernels: the scalar reference against the float dot of the dequantized rows, every SIMD
// level this CPU runs against the scalar reference (covers each kernel as it lands), dispatch.
#include "tern/kernels/cpu/vec_dot.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "tern/blocks/block_layouts.h"
#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/kernel_table.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

using testing::dequantized;
using testing::gaussian;

const DType kWeightTypes[] = {DType::F32,      DType::F16,      DType::BF16,      DType::Q4_0,
                              DType::Q4_1,     DType::Q5_0,     DType::Q5_1,      DType::Q8_0,
                              DType::Q2_K,     DType::Q3_K,     DType::Q4_K,      DType::Q5_K,
                              DType::Q6_K,     DType::IQ4_NL,   DType::IQ4_XS,    DType::MXFP4,
                              DType::INT4_G32, DType::INT4_G64, DType::INT4_G128, DType::INT8_G32,
                              DType::INT8_G64, DType::INT8_G128};

// Types whose every level gives the scalar twin's bits (their kernels meet the floats in the
// scalar order): the affine groups (the 16-chain arithmetic is their scalar dot), the K types
// below 4 bits, the IQ4 types and MXFP4.
bool every_level_is_scalar(DType weight) {
  return affine_int_format(weight) || weight == DType::Q2_K || weight == DType::Q3_K ||
         weight == DType::IQ4_NL || weight == DType::IQ4_XS || weight == DType::MXFP4;
}

// Row lengths with odd block counts and tails, per block size.
std::vector<int64_t> row_lengths(DType weight) {
  switch (dtype_traits(weight).block_elems) {
    case 1:
      return {1, 7, 16, 24, 33, 57, 100, 256, 1000, 2047, 4096};  // every tail shape of 16 and 32
    case 32:
      // (800: IQ4_NL's and MXFP4's 8 chains 3 times and one more block)
      return {32, 96, 160, 256, 800, 4096};
    case 64:
      return {64, 192, 576, 4096};
    case 128:
      return {128, 384, 1152, 4096};
    default:
      return {256, 768, 1280, 4096};
  }
}

// One weight row and one activation row, quantized, with their dequantized values.
struct DotCase {
  int64_t k;
  std::vector<uint8_t> w, a;
  std::vector<float> wf, af;
  double magnitude = 0;  // Σ |w_i a_i| of the dequantized rows
};

DotCase make_case(DType weight, int64_t k, uint32_t seed) {
  const TypeKernels& kern = type_kernels(weight, Isa::Scalar);
  DotCase c;
  c.k = k;
  std::vector<float> w = gaussian(k, seed), a = gaussian(k, seed + 1000, 3.0f);
  for (int64_t i = 0; i < k; i += 37) a[i] *= 8.0f;  // outliers, as real activations have
  c.w = testing::quantized(weight, w);
  c.a.resize(*dtype_bytes(kern.activation, k));
  kern.quantize_activation(a.data(), c.a.data(), k);
  c.wf = dequantized(weight, c.w.data(), k);
  c.af = dequantized(kern.activation, c.a.data(), k);
  for (int64_t i = 0; i < k; ++i) c.magnitude += std::fabs(static_cast<double>(c.wf[i]) * c.af[i]);
  return c;
}

// The scalar kernel computes Σ w_i a_i of the dequantized rows up to float rounding; for the
// Q8_1 types the offset term uses the activation's stored sum s, an f16 rounding of d Σ q.
TEST(VecDot, ScalarMatchesDequantizedDot) {
  for (DType weight : kWeightTypes) {
    for (int64_t k : row_lengths(weight)) {
      const DotCase c = make_case(weight, k, static_cast<uint32_t>(k));
      double exact = 0;
      for (int64_t i = 0; i < k; ++i) exact += static_cast<double>(c.wf[i]) * c.af[i];
      double tolerance = 1e-6 * c.magnitude + 1e-30;
      if (weight == DType::Q4_1 || weight == DType::Q5_1) {
        const size_t wb = dtype_traits(weight).block_bytes;
        const auto* a = reinterpret_cast<const BlockQ8_1*>(c.a.data());
        for (int64_t i = 0; i < k / kQK; ++i) {
          uint16_t m;  // the weight block's m follows its d
          std::memcpy(&m, c.w.data() + i * wb + 2, 2);
          tolerance += std::fabs(f16_to_f32(m) * f16_to_f32(a[i].s)) * (1.0 / 2048);
        }
      }
      const float got = scalar_vec_dot(weight)(k, c.w.data(), c.a.data());
      EXPECT_NEAR(got, exact, tolerance) << dtype_name(weight) << " k=" << k;
    }
  }
}

// Every ISA this CPU supports against the scalar reference, for every weight type: integer
// parts are exact, so the results differ only by the order of float accumulation, bounded by
// 1e-5 of Σ |w_i a_i| (a single wrong element of a 4096 row is ~2e-4 of it). The affine
// groups' scalar dot is the 16-chain arithmetic itself, and Q2_K's and Q3_K's kernels keep the
// scalar order: every level gives their bits.
TEST(VecDot, EverySupportedIsaMatchesScalar) {
  for (Isa isa : testing::simd_levels()) {
    if (!isa_supported(isa)) continue;
    for (DType weight : kWeightTypes) {
      const TypeKernels& kern = type_kernels(weight, isa);
      const VecDotFn scalar = scalar_vec_dot(weight);
      for (int64_t k : row_lengths(weight)) {
        for (uint32_t seed : {1u, 2u}) {
          const DotCase c = make_case(weight, k, seed * 7919 + static_cast<uint32_t>(k));
          const float want = scalar(k, c.w.data(), c.a.data());
          const float got = kern.vec_dot(k, c.w.data(), c.a.data());
          EXPECT_NEAR(got, want, 1e-5 * c.magnitude + 1e-30)
              << isa_name(isa) << " " << dtype_name(weight) << " k=" << k << " seed=" << seed;
          if (every_level_is_scalar(weight)) {
            EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
                << isa_name(isa) << " " << dtype_name(weight) << " k=" << k;
          }
        }
      }
    }
  }
}

// A level's rows-at-once kernel gives each row exactly its vec_dot.
TEST(VecDot, RowsAtOnceAreVecDotPerRow) {
  int checked = 0;
  for (Isa isa : testing::simd_levels()) {
    if (!isa_supported(isa)) continue;
    for (DType weight : kWeightTypes) {
      const TypeKernels& kern = type_kernels(weight, isa);
      if (kern.vec_dot_rows == nullptr) continue;
      for (int64_t k : row_lengths(weight)) {
        std::vector<DotCase> cases;
        const void* rows[kVecDotRows];
        for (int r = 0; r < kVecDotRows; ++r) {
          cases.push_back(make_case(weight, k, static_cast<uint32_t>(31 * k + r)));
        }
        for (int r = 0; r < kVecDotRows; ++r) rows[r] = cases[static_cast<size_t>(r)].w.data();
        float out[kVecDotRows];
        kern.vec_dot_rows(k, rows, cases[0].a.data(), out);
        for (int r = 0; r < kVecDotRows; ++r) {
          const float want = kern.vec_dot(k, rows[r], cases[0].a.data());
          ASSERT_EQ(std::bit_cast<uint32_t>(out[r]), std::bit_cast<uint32_t>(want))
              << isa_name(isa) << " " << dtype_name(weight) << " k=" << k << " row " << r;
        }
        ++checked;
      }
    }
  }
  if (isa_supported(Isa::Avx512)) {
    EXPECT_GT(checked, 0) << "F16 has a rows-at-once kernel from AVX-512 up";
  }
}

// Q2_K, Q3_K, IQ4, MXFP4, IQ3, IQ2 and IQ1 blocks of random bytes (every scale, min, high bit
// and quant pattern a quantizer may never write) against random activations: every level gives
// the scalar twin's bits.
TEST(VecDot, LowBitTypesOnRandomBytesAreTheScalarTwin) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  // Where each block keeps its f16 scales, which must be finite: d (and Q2_K's dmin) last in
  // the K types, d first in the IQ4 types. MXFP4's exponent (byte 0) is drawn in [0, 150], so
  // that the sums stay finite; its scales 2^−128 and 2^−127 are subnormal floats, and so are
  // their products with the activations' scales. IQ1_M's d is the top nibbles of its four
  // scale words.
  const struct {
    DType weight;
    std::vector<size_t> halves;
    bool exponent = false;
    bool nibbles = false;
  } cases[] = {{DType::Q2_K, {80, 82}}, {DType::Q3_K, {108}},     {DType::IQ4_NL, {0}},
               {DType::IQ4_XS, {0}},    {DType::MXFP4, {}, true}, {DType::IQ3_XXS, {0}},
               {DType::IQ3_S, {0}},     {DType::IQ2_XXS, {0}},    {DType::IQ2_XS, {0}},
               {DType::IQ2_S, {0}},     {DType::IQ1_S, {0}},      {DType::IQ1_M, {}, false, true}};
  const int64_t k = 256 * 9;  // two groups of four super-blocks and one more; 72 blocks of 32
  std::vector<float> x = gaussian(k, 6);
  for (const auto& c : cases) {
    const size_t block = dtype_traits(c.weight).block_bytes;
    const int64_t blocks = k / dtype_traits(c.weight).block_elems;
    const TypeKernels& scalar = type_kernels(c.weight, Isa::Scalar);
    std::vector<uint8_t> w(blocks * block), a(*dtype_bytes(scalar.activation, k));
    for (uint8_t& b : w) b = static_cast<uint8_t>(byte(rng));
    for (int64_t i = 0; i < blocks; ++i) {
      for (size_t off : c.halves) {
        const uint16_t d = f32_to_f16(unit(rng));
        std::memcpy(&w[i * block + off], &d, 2);
      }
      if (c.exponent) w[i * block] = static_cast<uint8_t>(i < 4 ? i : byte(rng) % 151);
      if (c.nibbles) {
        const uint16_t d = f32_to_f16(unit(rng));
        for (int n = 0; n < 4; ++n) {
          uint8_t& high = w[i * block + offsetof(BlockIq1M, scales) + 2 * n + 1];
          high = static_cast<uint8_t>((high & 0x0f) | ((d >> (4 * n)) & 0xf) << 4);
        }
      }
    }
    scalar.quantize_activation(x.data(), a.data(), k);
    const float want = scalar_vec_dot(c.weight)(k, w.data(), a.data());
    for (Isa isa : testing::simd_levels()) {
      if (!isa_supported(isa)) continue;
      const float got = type_kernels(c.weight, isa).vec_dot(k, w.data(), a.data());
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
          << isa_name(isa) << " " << dtype_name(c.weight);
    }
  }
}

// The IQ3, IQ2 and IQ1 types (random blocks: tern has no quantizer for them) against Q8_K
// activations: the scalar twin is the dot of the dequantized rows up to float rounding, and
// every level this CPU runs gives its bits, for rows of 1, 3, 5 and 16 super-blocks (the GEMV's
// groups of 4 and their tails).
TEST(VecDot, LatticeTypesOnRandomBlocks) {
  for (DType weight : {DType::IQ3_XXS, DType::IQ3_S, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                       DType::IQ1_S, DType::IQ1_M}) {
    const TypeKernels& scalar = type_kernels(weight, Isa::Scalar);
    EXPECT_EQ(scalar.activation, DType::Q8_K);
    for (int64_t k : {int64_t{256}, int64_t{768}, int64_t{1280}, int64_t{4096}}) {
      for (uint32_t seed : {1u, 2u, 3u}) {
        const std::vector<uint8_t> w = testing::random_blocks(weight, k, seed * 31 + k);
        std::vector<float> x = gaussian(k, seed + 77, 3.0f);
        for (int64_t i = 0; i < k; i += 37) x[i] *= 8.0f;
        std::vector<uint8_t> a(*dtype_bytes(DType::Q8_K, k));
        scalar.quantize_activation(x.data(), a.data(), k);
        const std::vector<float> wf = dequantized(weight, w.data(), k),
                                 af = dequantized(DType::Q8_K, a.data(), k);
        double exact = 0, magnitude = 0;
        for (int64_t i = 0; i < k; ++i) {
          exact += static_cast<double>(wf[i]) * af[i];
          magnitude += std::fabs(static_cast<double>(wf[i]) * af[i]);
        }
        const float want = scalar_vec_dot(weight)(k, w.data(), a.data());
        EXPECT_NEAR(want, exact, 1e-6 * magnitude) << dtype_name(weight) << " k=" << k;
        for (Isa isa : testing::simd_levels()) {
          if (!isa_supported(isa)) continue;
          const float got = type_kernels(weight, isa).vec_dot(k, w.data(), a.data());
          EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
              << isa_name(isa) << " " << dtype_name(weight) << " k=" << k << " seed=" << seed;
        }
      }
    }
  }
  // Every SIMD level has its own kernels for these (not the scalar twin's), so the loop above
  // tested them; but Amx runs Avx512's, and I8mm Dotprod's.
  for (DType weight : {DType::IQ3_XXS, DType::IQ3_S, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                       DType::IQ1_S, DType::IQ1_M}) {
    for (Isa isa : testing::simd_levels()) {
      const Isa own = isa == Isa::Amx ? Isa::Avx512 : isa == Isa::I8mm ? Isa::Dotprod : isa;
      EXPECT_EQ(kernel_row(weight, isa).from, own) << isa_name(isa) << " " << dtype_name(weight);
    }
  }
}

// Zero rows (all-zero scales) and rows of one repeated extreme value, through every ISA.
TEST(VecDot, DegenerateRows) {
  for (Isa isa : isa_levels()) {
    if (!isa_supported(isa)) continue;
    for (DType weight : kWeightTypes) {
      const TypeKernels& kern = type_kernels(weight, isa);
      const int64_t k = 512;
      const std::vector<float> zeros(k, 0.0f), ones(k, 1.0f);
      std::vector<uint8_t> w = testing::quantized(weight, zeros),
                           a(*dtype_bytes(kern.activation, k));
      kern.quantize_activation(ones.data(), a.data(), k);
      EXPECT_EQ(kern.vec_dot(k, w.data(), a.data()), 0.0f)
          << isa_name(isa) << " " << dtype_name(weight);
      w = testing::quantized(weight, ones);
      EXPECT_NEAR(kern.vec_dot(k, w.data(), a.data()), 512.0f, 512.0f * 2e-3)
          << isa_name(isa) << " " << dtype_name(weight);
    }
  }
}

TEST(VecDot, ActivationFormats) {
  EXPECT_EQ(type_kernels(DType::Q4_0, Isa::Scalar).activation, DType::Q8_0);
  EXPECT_EQ(type_kernels(DType::Q5_0, Isa::Scalar).activation, DType::Q8_0);
  EXPECT_EQ(type_kernels(DType::Q8_0, Isa::Scalar).activation, DType::Q8_0);
  EXPECT_EQ(type_kernels(DType::Q4_1, Isa::Scalar).activation, DType::Q8_1);
  EXPECT_EQ(type_kernels(DType::Q5_1, Isa::Scalar).activation, DType::Q8_1);
  EXPECT_EQ(type_kernels(DType::Q4_K, Isa::Scalar).activation, DType::Q8_K);
  EXPECT_EQ(type_kernels(DType::Q6_K, Isa::Scalar).activation, DType::Q8_K);
  EXPECT_EQ(type_kernels(DType::BF16, Isa::Scalar).activation, DType::BF16);
  EXPECT_EQ(type_kernels(DType::INT4_G128, Isa::Scalar).activation, DType::Q8_0);
  EXPECT_EQ(type_kernels(DType::INT8_G32, Isa::Scalar).activation, DType::Q8_0);
  EXPECT_EQ(type_kernels(DType::F16).weight, DType::F16);
  // F16 weights take f32 activations on every level, so one QuantizedActivations serves all.
  for (Isa isa : isa_levels()) {
    if (!isa_supported(isa)) continue;
    EXPECT_EQ(type_kernels(DType::F16, isa).activation, DType::F32) << isa_name(isa);
  }
}

TEST(VecDot, Dispatch) {
  EXPECT_TRUE(isa_supported(Isa::Scalar));
  EXPECT_TRUE(isa_supported(best_isa()));
  EXPECT_STREQ(isa_name(Isa::Avx512), "avx512");
  EXPECT_THROW(type_kernels(DType::Q8_1, Isa::Scalar), Error);  // an activation format only
  EXPECT_THROW(type_kernels(DType::Q8_K, Isa::Scalar), Error);  // an activation format only
  EXPECT_THROW(type_kernels(DType::I32, Isa::Scalar), Error);
  for (Isa isa : testing::simd_levels()) {
    if (!isa_supported(isa)) {
      EXPECT_THROW(type_kernels(DType::F32, isa), Error);
    }
  }
}

}  // namespace
}  // namespace tern::cpu
