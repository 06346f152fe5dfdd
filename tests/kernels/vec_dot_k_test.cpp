// The SIMD dot kernels of Q4_K, Q5_K and Q6_K against Q8_K activations, per ISA this CPU
// runs, against both the scalar reference (generic/vec_dot.cpp) and a reference written here
// from the block layouts (int64 sums, double accumulation): random rows, quantized Gaussian
// rows, hand-built edge blocks, and rows where every float step is exact so the kernels must
// match to the bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "tern/blocks/block_layouts.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/vec_dot.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

size_t block_bytes(DType type) {
  switch (type) {
    case DType::Q4_K:
      return sizeof(BlockQ4_K);
    case DType::Q5_K:
      return sizeof(BlockQ5_K);
    default:
      return sizeof(BlockQ6_K);
  }
}

// ---- the reference, from the layout formulas ----

// Inverse of the 6-bit packing: sub-blocks 0-3 in the low 6 bits of bytes 0-3 (scales) and
// 4-7 (mins); sub-blocks 4-7 split into a nibble of bytes 8-11 (scale low, min high) and the
// top two bits of bytes 0-3 / 4-7.
void pack_scales_mins(const int sc[8], const int m[8], uint8_t out[kKScaleBytes]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}
void unpack_scales_mins(const uint8_t in[kKScaleBytes], int sc[8], int m[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = in[j] & 63;
    m[j] = in[j + 4] & 63;
    sc[j + 4] = (in[j + 8] & 15) | ((in[j] >> 6) << 4);
    m[j + 4] = (in[j + 8] >> 4) | ((in[j + 4] >> 6) << 4);
  }
}

// Quant of element e of a Q4_K / Q5_K super-block (without Q5_K's fifth bit): 64-element
// chunk e/64 is qs[32 (e/64) ..]; its first 32 elements are low nibbles, the next 32 high.
int nibble_45(const uint8_t* qs, int e) {
  const uint8_t byte = qs[32 * (e / 64) + e % 32];
  return (e % 64) < 32 ? (byte & 15) : (byte >> 4);
}

struct RefSum {
  double value = 0;
  double magnitude = 0;  // Σ |terms|, the scale of float rounding
};

RefSum reference_dot(DType type, int64_t k, const void* w_row, const BlockQ8_K* a) {
  RefSum r;
  const auto* bytes = static_cast<const uint8_t*>(w_row);
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const void* blk = bytes + i * block_bytes(type);
    int64_t s = 0, mag_s = 0, mins = 0, mag_m = 0;
    float d, dmin = 0;
    if (type == DType::Q6_K) {
      const auto& w = *static_cast<const BlockQ6_K*>(blk);
      d = f16_to_f32(w.d) * a[i].d;
      for (int e = 0; e < kQKK; ++e) {
        const int half = e / 128, l = e % 32, part = (e % 128) / 32;  // part 0..3
        const uint8_t ql = w.ql[64 * half + l + (part % 2) * 32];
        const int low = part < 2 ? (ql & 15) : (ql >> 4);
        const int high = (w.qh[32 * half + l] >> (2 * part)) & 3;
        const int64_t t = int64_t{w.scales[e / 16]} * ((low | high << 4) - 32) * a[i].qs[e];
        s += t;
        mag_s += std::llabs(t);
      }
    } else {
      const uint8_t* scales = type == DType::Q4_K ? static_cast<const BlockQ4_K*>(blk)->scales
                                                  : static_cast<const BlockQ5_K*>(blk)->scales;
      const uint8_t* qs = type == DType::Q4_K ? static_cast<const BlockQ4_K*>(blk)->qs
                                              : static_cast<const BlockQ5_K*>(blk)->qs;
      const uint16_t dh = type == DType::Q4_K ? static_cast<const BlockQ4_K*>(blk)->d
                                              : static_cast<const BlockQ5_K*>(blk)->d;
      const uint16_t dminh = type == DType::Q4_K ? static_cast<const BlockQ4_K*>(blk)->dmin
                                                 : static_cast<const BlockQ5_K*>(blk)->dmin;
      d = f16_to_f32(dh) * a[i].d;
      dmin = f16_to_f32(dminh) * a[i].d;
      int sc[8], m[8];
      unpack_scales_mins(scales, sc, m);
      for (int e = 0; e < kQKK; ++e) {
        int q = nibble_45(qs, e);
        // Q5_K: bit (sub-block) of qh[element within sub-block]
        if (type == DType::Q5_K)
          q |= ((static_cast<const BlockQ5_K*>(blk)->qh[e % 32] >> (e / 32)) & 1) << 4;
        const int64_t t = int64_t{sc[e / 32]} * q * a[i].qs[e];
        const int64_t tm = int64_t{m[e / 32]} * a[i].qs[e];
        s += t;
        mag_s += std::llabs(t);
        mins += tm;
        mag_m += std::llabs(tm);
      }
    }
    r.value += double{d} * static_cast<double>(s) - double{dmin} * static_cast<double>(mins);
    r.magnitude += std::fabs(double{d}) * static_cast<double>(mag_s) +
                   std::fabs(double{dmin}) * static_cast<double>(mag_m);
  }
  return r;
}

// ---- data ----

void finish_q8_k(BlockQ8_K& b) {
  for (int g = 0; g < kQKK / 16; ++g) {
    int sum = 0;
    for (int e = 0; e < 16; ++e) sum += b.qs[16 * g + e];
    b.bsums[g] = static_cast<int16_t>(sum);
  }
}

// Random bytes everywhere except the f16 scales, which are finite.
std::vector<uint8_t> random_weights(DType type, int64_t nb, std::mt19937& rng, float d_max,
                                    float dmin_max) {
  std::vector<uint8_t> row(nb * block_bytes(type));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* blk = row.data() + i * block_bytes(type);
    const uint16_t d = f32_to_f16(d_max * unit(rng));
    const uint16_t dmin = f32_to_f16(dmin_max * std::fabs(unit(rng)));
    if (type == DType::Q6_K) {
      std::memcpy(blk + offsetof(BlockQ6_K, d), &d, 2);
    } else {  // Q4_K and Q5_K both start with d, dmin
      std::memcpy(blk, &d, 2);
      std::memcpy(blk + 2, &dmin, 2);
    }
  }
  return row;
}

std::vector<BlockQ8_K> random_activations(int64_t nb, std::mt19937& rng, int lo, int hi, float d) {
  std::vector<BlockQ8_K> row(nb);
  std::uniform_int_distribution<int> q(lo, hi);
  std::uniform_real_distribution<float> unit(0.5f, 1.0f);
  for (auto& b : row) {
    b.d = d < 0 ? 0.01f * unit(rng) : d;
    for (auto& v : b.qs) v = static_cast<int8_t>(q(rng));
    finish_q8_k(b);
  }
  return row;
}

// ---- tests ----

using Param = std::tuple<DType, Isa>;

class VecDotK : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    std::tie(type_, isa_) = GetParam();
    if (!isa_supported(isa_)) GTEST_SKIP() << "this CPU does not run the ISA";
    fn_ = type_kernels(type_, isa_).vec_dot;
    scalar_ = scalar_vec_dot(type_);
    ASSERT_NE(fn_, nullptr);
    ASSERT_NE(scalar_, nullptr);
  }
  // SIMD vs reference within float rounding of the row's magnitude.
  void expect_close(int64_t k, const std::vector<uint8_t>& w, const std::vector<BlockQ8_K>& a,
                    const std::string& what) {
    const RefSum ref = reference_dot(type_, k, w.data(), a.data());
    const float got = fn_(k, w.data(), a.data());
    const float scalar = scalar_(k, w.data(), a.data());
    EXPECT_NEAR(got, ref.value, 1e-5 * ref.magnitude + 1e-30) << what << " k=" << k;
    EXPECT_NEAR(got, scalar, 1e-5 * ref.magnitude + 1e-30) << what << " k=" << k << " (scalar)";
  }
  DType type_{};
  Isa isa_{};
  VecDotFn fn_ = nullptr;
  VecDotFn scalar_ = nullptr;
};

TEST_P(VecDotK, RandomRowsMatchReference) {
  std::mt19937 rng(1234 + static_cast<int>(type_) * 7 + static_cast<int>(isa_));
  // 1, 2, 6, 10, 12, 16 and 17 super-blocks: the AMX level's GEMV takes them in groups of 4,
  // 8, 8 + 4 and 16.
  for (int64_t k : {256, 512, 1536, 2560, 3072, 4096, 4352}) {
    for (int rep = 0; rep < 20; ++rep) {
      const auto w = random_weights(type_, k / kQKK, rng, 0.05f, 0.02f);
      const auto a = random_activations(k / kQKK, rng, -128, 127, -1.0f);
      expect_close(k, w, a, "rep " + std::to_string(rep));
    }
  }
}

// Rows as a model has them: Gaussian weights and activations through tern's quantizers.
TEST_P(VecDotK, QuantizedGaussianRowsMatchReference) {
  for (int64_t k : {256, 512, 4096, 4352}) {
    for (uint32_t seed : {1u, 2u, 3u}) {
      std::mt19937 rng(seed * 31 + static_cast<uint32_t>(k));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> wf(k), af(k);
      for (auto& x : wf) x = normal(rng);
      for (auto& x : af) x = normal(rng);
      std::vector<uint8_t> w(k / kQKK * block_bytes(type_));
      std::vector<BlockQ8_K> a(k / kQKK);
      quantize_row(type_, wf.data(), w.data(), k);
      quantize_row(DType::Q8_K, af.data(), a.data(), k);
      expect_close(k, w, a, "seed " + std::to_string(seed));
    }
  }
}

// d = dmin = 1 and activations in [-2, 2]: every partial sum is an integer below 2^24, so
// every float step is exact and the kernel must equal the integer reference exactly.
TEST_P(VecDotK, SmallIntegerRowsAreExact) {
  std::mt19937 rng(99 + static_cast<int>(type_));
  for (int64_t k : {256, 512, 1024, 1536}) {
    for (int rep = 0; rep < 50; ++rep) {
      auto w = random_weights(type_, k / kQKK, rng, 0, 0);
      for (int64_t i = 0; i < k / kQKK; ++i) {
        uint8_t* blk = w.data() + i * block_bytes(type_);
        const uint16_t one = f32_to_f16(1.0f);
        std::memcpy(type_ == DType::Q6_K ? blk + offsetof(BlockQ6_K, d) : blk, &one, 2);
        if (type_ != DType::Q6_K) std::memcpy(blk + 2, &one, 2);
      }
      const auto a = random_activations(k / kQKK, rng, -2, 2, 1.0f);
      const RefSum ref = reference_dot(type_, k, w.data(), a.data());
      ASSERT_LT(ref.magnitude, 16777216.0);
      EXPECT_EQ(fn_(k, w.data(), a.data()), static_cast<float>(ref.value)) << "k=" << k;
      EXPECT_EQ(fn_(k, w.data(), a.data()), scalar_(k, w.data(), a.data())) << "k=" << k;
    }
  }
}

// Weight super-blocks at the edges of every field.
std::vector<std::vector<uint8_t>> edge_weight_blocks(DType type) {
  std::vector<std::vector<uint8_t>> blocks;
  const uint16_t one = f32_to_f16(1.0f), zero = 0, half = f32_to_f16(0.5f);
  if (type == DType::Q6_K) {
    for (int qbyte : {0x00, 0xff, 0x5a}) {
      for (int sc : {127, -128, 0, 1}) {
        for (uint16_t d : {one, zero, half}) {
          BlockQ6_K b;
          std::memset(b.ql, qbyte, sizeof b.ql);
          std::memset(b.qh, qbyte, sizeof b.qh);
          for (auto& s : b.scales) s = static_cast<int8_t>(sc);
          b.d = d;
          const auto* p = reinterpret_cast<const uint8_t*>(&b);
          blocks.emplace_back(p, p + sizeof b);
        }
      }
    }
    // One scale at a time, so a scale applied to the wrong 16 elements shows.
    for (int s = 0; s < 16; ++s) {
      BlockQ6_K b;
      for (int e = 0; e < 128; ++e) b.ql[e] = static_cast<uint8_t>(e * 37 + 11);
      for (int e = 0; e < 64; ++e) b.qh[e] = static_cast<uint8_t>(e * 53 + 5);
      std::memset(b.scales, 0, sizeof b.scales);
      b.scales[s] = static_cast<int8_t>(s % 2 ? -128 : 127);
      b.d = one;
      const auto* p = reinterpret_cast<const uint8_t*>(&b);
      blocks.emplace_back(p, p + sizeof b);
    }
    return blocks;
  }
  // Q4_K / Q5_K: the same fields, Q5_K with its high bits in between.
  auto make = [&](const int sc[8], const int m[8], int qbyte, int qhbyte, uint16_t d,
                  uint16_t dmin) {
    std::vector<uint8_t> blk(block_bytes(type));
    uint8_t* p = blk.data();
    std::memcpy(p, &d, 2);
    std::memcpy(p + 2, &dmin, 2);
    pack_scales_mins(sc, m, p + 4);
    if (type == DType::Q5_K) {
      std::memset(p + offsetof(BlockQ5_K, qh), qhbyte, kQKK / 8);
      std::memset(p + offsetof(BlockQ5_K, qs), qbyte, kQKK / 2);
    } else {
      std::memset(p + offsetof(BlockQ4_K, qs), qbyte, kQKK / 2);
    }
    return blk;
  };
  const int max6[8] = {63, 63, 63, 63, 63, 63, 63, 63}, zero6[8] = {};
  for (int qbyte : {0x00, 0xff, 0x0f, 0xf0}) {
    for (int qhbyte : {0x00, 0xff, 0x55}) {
      blocks.push_back(make(max6, max6, qbyte, qhbyte, one, one));
      blocks.push_back(make(max6, zero6, qbyte, qhbyte, one, one));
      blocks.push_back(make(zero6, max6, qbyte, qhbyte, one, one));
      blocks.push_back(make(max6, max6, qbyte, qhbyte, zero, one));
      blocks.push_back(make(max6, max6, qbyte, qhbyte, one, zero));
      blocks.push_back(make(max6, max6, qbyte, qhbyte, zero, zero));
    }
  }
  // One sub-block's scale and another's min at a time (including those split across bytes).
  for (int s = 0; s < 8; ++s) {
    int sc[8] = {}, m[8] = {};
    sc[s] = 63 - s;
    m[(s + 3) % 8] = 33 + s;
    blocks.push_back(make(sc, m, 0x7c, 1 << s, one, half));
  }
  return blocks;
}

std::vector<BlockQ8_K> edge_activation_blocks() {
  std::vector<BlockQ8_K> blocks;
  for (int pattern = 0; pattern < 5; ++pattern) {
    BlockQ8_K b;
    b.d = pattern == 4 ? 0.0f : 1.0f;
    for (int e = 0; e < kQKK; ++e) {
      const int v[5] = {127, -128, e % 2 ? 127 : -128, (e * 29) % 256 - 128, 127};
      b.qs[e] = static_cast<int8_t>(v[pattern]);
    }
    finish_q8_k(b);
    blocks.push_back(b);
  }
  return blocks;
}

TEST_P(VecDotK, EdgeBlocksMatchReference) {
  const auto weights = edge_weight_blocks(type_);
  const auto acts = edge_activation_blocks();
  std::vector<uint8_t> long_w;
  std::vector<BlockQ8_K> long_a;
  for (size_t wi = 0; wi < weights.size(); ++wi) {
    for (size_t ai = 0; ai < acts.size(); ++ai) {
      const std::vector<BlockQ8_K> a = {acts[ai]};
      expect_close(kQKK, weights[wi], a,
                   "weight edge " + std::to_string(wi) + ", activation edge " + std::to_string(ai));
      long_w.insert(long_w.end(), weights[wi].begin(), weights[wi].end());
      long_a.push_back(acts[ai]);
    }
  }
  expect_close(static_cast<int64_t>(long_a.size()) * kQKK, long_w, long_a, "all edges in one row");
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const DType t = std::get<0>(info.param);
  const std::string type = t == DType::Q4_K ? "Q4_K" : t == DType::Q5_K ? "Q5_K" : "Q6_K";
  const Isa isa = std::get<1>(info.param);
  return type + "_" + isa_name(isa);
}

INSTANTIATE_TEST_SUITE_P(KTypes, VecDotK,
                         ::testing::Combine(::testing::Values(DType::Q4_K, DType::Q5_K,
                                                              DType::Q6_K),
                                            ::testing::ValuesIn(testing::simd_levels())),
                         param_name);

// The family's getters cover exactly the K types, so the dispatcher falls back for the rest.
#if defined(__x86_64__)
TEST(VecDotKFamily, OtherTypesHaveNoKernelHere) {
  for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q8_K}) {
    EXPECT_EQ(avx2_vec_dot_k(t), nullptr);
    EXPECT_EQ(chains16_vec_dot_k(t), nullptr);
    EXPECT_EQ(chains16_packed_k(t), nullptr);
    EXPECT_EQ(chains16_gemm_k(t), nullptr);
    EXPECT_EQ(amx_gemm_k(t), nullptr);
  }
}
#endif

}  // namespace
}  // namespace tern::cpu
