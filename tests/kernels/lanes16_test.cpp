#include "tern/kernels/cpu/ops/lanes16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

namespace tern::cpu {
namespace {

// The scalar twin's: every level's exp16 is the same arithmetic with its own fma16 (the levels'
// kernels are compared with the twin's bit for bit in ops_test and attention_test).
float exp_one(float x) { return exp16<ScalarF32x16>(splat16(x))[0]; }

// Distance in units in the last place between two finite floats of the same sign.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(int64_t{ia} - ib);
}

TEST(Lanes16, ExpWithinTwoUlpOfStdExp) {
  // Every 97th float of the range where e^x is a normal float, plus random ones.
  const float lo = -87.3f, hi = 88.7f;
  int64_t worst = 0;
  float worst_x = 0;
  auto check = [&](float x) {
    const float want = std::exp(x);
    const int64_t d = ulps(exp_one(x), want);
    if (d > worst) worst = d, worst_x = x;
  };
  int32_t bits;
  for (float x = lo; x < hi;) {
    check(x);
    std::memcpy(&bits, &x, 4);
    bits += x < 0 ? -97 : 97;
    std::memcpy(&x, &bits, 4);
    if (x > -1e-30f && x < 1e-30f) x = 1e-30f;  // step over the tiny magnitudes near 0
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int i = 0; i < 200000; ++i) check(dist(rng));
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
}

TEST(Lanes16, ExpEdgeCases) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp_one(0.0f), 1.0f);
  EXPECT_EQ(exp_one(-0.0f), 1.0f);
  EXPECT_EQ(exp_one(-inf), 0.0f);
  EXPECT_EQ(exp_one(-104.0f), 0.0f);
  EXPECT_EQ(exp_one(-1e30f), 0.0f);
  EXPECT_EQ(exp_one(inf), inf);
  EXPECT_EQ(exp_one(88.8f), inf);
  EXPECT_EQ(exp_one(1e30f), inf);
  EXPECT_TRUE(std::isnan(exp_one(std::numeric_limits<float>::quiet_NaN())));
  // The largest finite results and the subnormal range: close in absolute terms.
  EXPECT_LE(ulps(exp_one(88.72f), std::exp(88.72f)), 2);
  for (float x = -103.9f; x < -87.3f; x += 0.37f) {
    EXPECT_NEAR(exp_one(x), std::exp(x), 4 * std::numeric_limits<float>::denorm_min()) << x;
  }
  // Lanes are independent: a -inf lane next to finite ones.
  F32x16 v = splat16(-1.0f);
  v[3] = -inf;
  const F32x16 e = exp16<ScalarF32x16>(v);
  for (int l = 0; l < 16; ++l) EXPECT_EQ(e[l], l == 3 ? 0.0f : exp_one(-1.0f));
}

TEST(Lanes16, SumOfSixteenMatchesScalarTreePerLane) {
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 100.0f);
  for (int round = 0; round < 100; ++round) {
    F32x16 acc[16];
    for (auto& v : acc) {
      for (int l = 0; l < 16; ++l) v[l] = dist(rng);
    }
    F32x16 want;
    for (int j = 0; j < 16; ++j) want[j] = sum_lanes_scalar(acc[j]);
    const F32x16 got = sum_lanes_of_16(acc);
    for (int j = 0; j < 16; ++j) ASSERT_EQ(got[j], want[j]) << "key " << j;
  }
}

TEST(Lanes16, MaxLane) {
  F32x16 v = splat16(-std::numeric_limits<float>::infinity());
  for (int l = 0; l < 16; ++l) {
    F32x16 w = v;
    w[l] = 3.0f;
    EXPECT_EQ(max_lane(w), 3.0f);
  }
}

}  // namespace
}  // namespace tern::cpu
