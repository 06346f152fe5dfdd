#include "tern/kernels/cpu/ops/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tern/core/error.h"

namespace tern::cpu {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

RopeConfig config(int head_dim, RopeLayout layout, double theta = 10000.0) {
  RopeConfig c;
  c.head_dim = head_dim;
  c.theta = theta;
  c.layout = layout;
  return c;
}

// head_dim 4, theta 10000: inv_freq = [1, 1/100]. At position 2 the angles are 2 and 0.02.
TEST(Rope, InterleavedByHand) {
  Rope rope(config(4, RopeLayout::Interleaved));
  ASSERT_EQ(rope.inv_freq().size(), 2u);
  EXPECT_DOUBLE_EQ(rope.inv_freq()[0], 1.0);
  EXPECT_NEAR(rope.inv_freq()[1], 0.01, 1e-16);
  std::vector<float> x{1, 2, 3, 4};
  const int32_t pos[] = {2};
  rope.apply(x.data(), 1, pos);
  const double a = 2.0, b = 0.02;
  const double want[] = {1 * std::cos(a) - 2 * std::sin(a), 1 * std::sin(a) + 2 * std::cos(a),
                         3 * std::cos(b) - 4 * std::sin(b), 3 * std::sin(b) + 4 * std::cos(b)};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(x[i], want[i], 1e-6) << i;
}

TEST(Rope, NeoxByHand) {
  Rope rope(config(4, RopeLayout::Neox));
  std::vector<float> x{1, 2, 3, 4};
  const int32_t pos[] = {2};
  rope.apply(x.data(), 1, pos);
  // Pairs (0, 2) at angle 2 and (1, 3) at angle 0.02.
  const double a = 2.0, b = 0.02;
  const double want[] = {1 * std::cos(a) - 3 * std::sin(a), 2 * std::cos(b) - 4 * std::sin(b),
                         1 * std::sin(a) + 3 * std::cos(a), 2 * std::sin(b) + 4 * std::cos(b)};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(x[i], want[i], 1e-6) << i;
}

TEST(Rope, PositionZeroIsIdentity) {
  for (auto layout : {RopeLayout::Interleaved, RopeLayout::Neox}) {
    Rope rope(config(64, layout));
    auto x = random_floats(3 * 64, 1);
    auto y = x;
    const int32_t pos[] = {0};
    rope.apply(y.data(), 3, pos);
    EXPECT_EQ(x, y);
  }
}

// Neox applied to de-interleaved vectors equals interleaved applied to the interleaved ones:
// the two layouts are the same rotation of differently ordered dimensions (the permutation
// llama.cpp's converter applies to q/k weights). Exact, since the arithmetic is the same.
TEST(Rope, NeoxOnDeinterleavedEqualsInterleaved) {
  for (int rotary_dim : {128, 64}) {  // full and partial rotary
    const int head_dim = 128, n_heads = 3;
    RopeConfig ci = config(head_dim, RopeLayout::Interleaved, 1e6);
    ci.rotary_dim = rotary_dim;
    RopeConfig cn = ci;
    cn.layout = RopeLayout::Neox;
    Rope inter(ci), neox(cn);
    const std::vector<int32_t> positions{0, 1, 7, 4095, 40000};
    const size_t t = positions.size();
    auto x = random_floats(t * n_heads * head_dim, 2);
    // de-interleave the rotated part of each head: d[i] = x[2i], d[half + i] = x[2i + 1]
    auto deinterleave = [&](const std::vector<float>& v) {
      std::vector<float> d = v;
      const int half = rotary_dim / 2;
      for (size_t h = 0; h < t * n_heads; ++h) {
        for (int i = 0; i < half; ++i) {
          d[h * head_dim + i] = v[h * head_dim + 2 * i];
          d[h * head_dim + half + i] = v[h * head_dim + 2 * i + 1];
        }
      }
      return d;
    };
    auto d = deinterleave(x);
    inter.apply(x.data(), n_heads, positions);
    neox.apply(d.data(), n_heads, positions);
    EXPECT_EQ(deinterleave(x), d) << rotary_dim;
  }
}

TEST(Rope, PartialRotaryLeavesTheRestAlone) {
  RopeConfig c = config(8, RopeLayout::Neox);
  c.rotary_dim = 4;
  Rope rope(c);
  EXPECT_EQ(rope.inv_freq().size(), 2u);
  EXPECT_NEAR(rope.inv_freq()[1], 0.01, 1e-16);  // exponent over rotary_dim, not head_dim
  std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8};
  const int32_t pos[] = {2};
  rope.apply(x.data(), 1, pos);
  EXPECT_NEAR(x[0], 1 * std::cos(2.0) - 3 * std::sin(2.0), 1e-6);
  EXPECT_EQ(x[4], 5);
  EXPECT_EQ(x[7], 8);
}

// Llama 3.2 1B: head_dim 64, theta 500000, llama3 scaling factor 32, low 1, high 4, original
// 8192. Wavelengths under 2048 keep their frequency, over 8192 are divided by 32, and pairs
// 15..17 lie in the interpolated band. Values computed by hand from HF's formula.
TEST(Rope, Llama3ScaledFrequencies) {
  RopeConfig c = config(64, RopeLayout::Interleaved, 500000.0);
  c.scaling.type = RopeScalingType::Llama3;
  c.scaling.factor = 32;
  c.scaling.low_freq_factor = 1;
  c.scaling.high_freq_factor = 4;
  c.scaling.original_max_position_embeddings = 8192;
  Rope rope(c);
  auto f = rope.inv_freq();
  ASSERT_EQ(f.size(), 32u);
  auto near = [](double got, double want) { EXPECT_NEAR(got, want, want * 1e-12); };
  near(f[0], 1.0);
  near(f[1], 0.6636012376960885);
  near(f[14], 0.003211445994752591);    // wavelength 1956: unchanged
  near(f[15], 0.001290547928209264);    // wavelength 2948: smooth 0.59
  near(f[16], 0.00042955679655936815);  // wavelength 4443: smooth 0.28
  near(f[17], 9.70828780262767e-05);    // wavelength 6695: smooth 0.07
  near(f[18], 1.9461638184831125e-05);  // wavelength 10089: / 32
  near(f[31], 9.41830672543491e-08);
}

// Qwen3's long-context YaRN (head_dim 128, theta 1e6, factor 4 over an original 32768): pairs
// up to 23 (floor of the correction dim of 32 rotations, 23.6) keep their frequency, from 40
// (ceil of 1 rotation's, 39.65) on are divided by 4, the ramp between linear; cos and sin are
// scaled by 1 + 0.1 ln 4. Values computed by hand from HF's _compute_yarn_parameters.
TEST(Rope, YarnScaledFrequenciesAndMagnitude) {
  RopeConfig c = config(128, RopeLayout::Neox, 1e6);
  c.scaling.type = RopeScalingType::Yarn;
  c.scaling.factor = 4;
  c.scaling.original_max_position_embeddings = 32768;
  c.scaling.attention_factor = 1.138629436111989;
  Rope rope(c);
  auto f = rope.inv_freq();
  ASSERT_EQ(f.size(), 64u);
  auto near = [](double got, double want) { EXPECT_NEAR(got, want, want * 1e-12); };
  near(f[0], 1.0);
  near(f[1], 0.8058421877614819);
  near(f[23], 0.006978305848598663);  // the last kept
  near(f[24], 0.005375321490790102);
  near(f[30], 0.001064360981247002);
  near(f[39], 6.490394320837029e-05);
  near(f[40], 4.445698525097307e-05);  // the first divided by 4
  near(f[63], 3.102344401879299e-07);
  const int32_t positions[] = {0, 777};
  std::vector<float> table(2 * 128);
  rope.fill_cos_sin(positions, table.data());
  EXPECT_FLOAT_EQ(table[0], 1.138629436111989f);  // cos 0, scaled
  for (int i = 0; i < 64; ++i) {
    const double cos = table[128 + i], sin = table[128 + 64 + i];
    EXPECT_NEAR(std::sqrt(cos * cos + sin * sin), 1.138629436111989, 1e-6) << i;
  }
  // Without truncation (gpt-oss's), the ramp runs between the unrounded dims.
  c.scaling.truncate = false;
  const double low = 23.5959476083381, high = 39.6508807104171;
  const double ramp = (30 - low) / (high - low), extrapolated = std::pow(1e6, -60.0 / 128);
  near(Rope(c).inv_freq()[30], extrapolated / 4 * ramp + extrapolated * (1 - ramp));
}

TEST(Rope, LinearScalingAndFreqFactors) {
  RopeConfig base = config(16, RopeLayout::Neox);
  Rope plain(base);
  RopeConfig lin = base;
  lin.scaling.type = RopeScalingType::Linear;
  lin.scaling.factor = 4;
  Rope linear(lin);
  RopeConfig ff = base;
  ff.freq_factors = {1, 2, 3, 4, 5, 6, 7, 8};
  Rope factors(ff);
  for (int i = 0; i < 8; ++i) {
    EXPECT_DOUBLE_EQ(linear.inv_freq()[i], plain.inv_freq()[i] / 4) << i;
    EXPECT_DOUBLE_EQ(factors.inv_freq()[i], plain.inv_freq()[i] / (i + 1)) << i;
  }
  // Linear scaling at position 4p rotates like no scaling at position p.
  auto x = random_floats(16, 3);
  auto y = x;
  const int32_t p4[] = {40}, p1[] = {10};
  linear.apply(x.data(), 1, p4);
  plain.apply(y.data(), 1, p1);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(x[i], y[i], 1e-6) << i;
}

// A token's rotation is the same bits alone or among others, and apply_qk on a fused qkv row
// (token stride > heads) equals apply on separate q and k.
TEST(Rope, BatchInvariantAndFusedStride) {
  const int hd = 64, nq = 4, nk = 2, nv = 2;
  Rope rope(config(hd, RopeLayout::Neox, 1e6));
  const std::vector<int32_t> positions{5, 0, 123, 77, 9, 1000, 3, 64, 8191, 2};  // >= 8: parallel
  const int64_t t = static_cast<int64_t>(positions.size());
  const int64_t stride = (nq + nk + nv) * hd;
  auto qkv = random_floats(t * stride, 4);
  auto fused = qkv;
  rope.apply_qk(fused.data(), nq, fused.data() + nq * hd, nk, positions, stride, stride);
  for (int64_t i = 0; i < t; ++i) {
    std::vector<float> q(qkv.begin() + i * stride, qkv.begin() + i * stride + nq * hd);
    std::vector<float> k(qkv.begin() + i * stride + nq * hd,
                         qkv.begin() + i * stride + (nq + nk) * hd);
    const int32_t pos[] = {positions[i]};
    rope.apply(q.data(), nq, pos);
    rope.apply(k.data(), nk, pos);
    for (int j = 0; j < nq * hd; ++j) ASSERT_EQ(q[j], fused[i * stride + j]) << i;
    for (int j = 0; j < nk * hd; ++j) ASSERT_EQ(k[j], fused[i * stride + nq * hd + j]) << i;
    for (int j = (nq + nk) * hd; j < stride; ++j) {
      ASSERT_EQ(qkv[i * stride + j], fused[i * stride + j]);  // v untouched
    }
  }
}

// The per-step table gives the same bits as computing cos/sin in every call.
TEST(Rope, CosSinTableMatchesDirect) {
  RopeConfig c = config(64, RopeLayout::Interleaved, 500000.0);
  c.rotary_dim = 32;
  Rope rope(c);
  const std::vector<int32_t> positions{3, 0, 9000, 17, 4, 5, 6, 7, 131071};
  const int64_t t = static_cast<int64_t>(positions.size());
  auto q = random_floats(t * 4 * 64, 5);
  auto k = random_floats(t * 2 * 64, 6);
  auto q2 = q, k2 = k;
  rope.apply_qk(q.data(), 4, k.data(), 2, positions);
  std::vector<float> table(t * rope.rotary_dim());
  rope.fill_cos_sin(positions, table.data());
  rope.apply_qk(q2.data(), 4, k2.data(), 2, table.data(), t);
  EXPECT_EQ(q, q2);
  EXPECT_EQ(k, k2);
}

TEST(Rope, RejectsBadConfigs) {
  EXPECT_THROW(Rope(config(0, RopeLayout::Neox)), Error);
  RopeConfig odd = config(64, RopeLayout::Neox);
  odd.rotary_dim = 63;
  EXPECT_THROW(Rope{odd}, Error);
  RopeConfig wide = config(64, RopeLayout::Neox);
  wide.rotary_dim = 128;
  EXPECT_THROW(Rope{wide}, Error);
  EXPECT_THROW(Rope(config(64, RopeLayout::Neox, 0.0)), Error);
  RopeConfig bad_ff = config(64, RopeLayout::Neox);
  bad_ff.freq_factors = {1, 2};
  EXPECT_THROW(Rope{bad_ff}, Error);
  RopeConfig bad_llama3 = config(64, RopeLayout::Neox);
  bad_llama3.scaling.type = RopeScalingType::Llama3;
  bad_llama3.scaling.factor = 8;
  bad_llama3.scaling.low_freq_factor = 4;
  bad_llama3.scaling.high_freq_factor = 1;
  EXPECT_THROW(Rope{bad_llama3}, Error);
}

}  // namespace
}  // namespace tern::cpu
