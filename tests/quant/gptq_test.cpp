// GPTQ: the factor is the upper Cholesky factor of the damped inverse second moments; on
// inputs whose columns are correlated (as a model's activations are), quantizing column by
// column with the error passed on gives a lower output error δᵀ H δ than the importance-
// weighted quantizer, which sees only H's diagonal, for every block type; second moments that
// are no second moments are refused.
#include "tern/quant/gptq.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/quant/weight_quantizer.h"

namespace tern::quant {
namespace {

using testing::gaussian;

// E[x xᵀ] of `tokens` inputs x = z · A + noise: 8 shared factors mixed into every column with
// column scales spanning two orders of magnitude, so the columns are strongly correlated.
std::vector<float> correlated_second_moments(int64_t cols, int64_t tokens, uint32_t seed) {
  constexpr int64_t kFactors = 8;
  const std::vector<float> mix = gaussian(static_cast<size_t>(kFactors * cols), seed);
  const std::vector<float> z = gaussian(static_cast<size_t>(tokens * kFactors), seed + 1);
  const std::vector<float> noise = gaussian(static_cast<size_t>(tokens * cols), seed + 2, 0.3f);
  std::vector<double> h(static_cast<size_t>(cols * cols), 0.0);
  std::vector<double> x(static_cast<size_t>(cols));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < cols; ++j) {
      double v = noise[static_cast<size_t>(t * cols + j)];
      for (int64_t f = 0; f < kFactors; ++f)
        v += z[static_cast<size_t>(t * kFactors + f)] * mix[static_cast<size_t>(f * cols + j)];
      x[static_cast<size_t>(j)] = v * std::exp(2.3 * std::sin(0.37 * static_cast<double>(j)));
    }
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < cols; ++j)
        h[static_cast<size_t>(i * cols + j)] +=
            x[static_cast<size_t>(i)] * x[static_cast<size_t>(j)];
  }
  std::vector<float> out(h.size());
  for (size_t i = 0; i < h.size(); ++i)
    out[i] = static_cast<float>(h[i] / static_cast<double>(tokens));
  return out;
}

// δᵀ H δ for δ = x − dequantized(y).
double output_error(DType dtype, const std::vector<float>& x, const std::vector<uint8_t>& y,
                    const std::vector<float>& h) {
  const auto k = static_cast<int64_t>(x.size());
  const std::vector<float> back = testing::dequantized(dtype, y.data(), k);
  std::vector<double> d(x.size());
  for (size_t i = 0; i < x.size(); ++i) d[i] = static_cast<double>(x[i]) - back[i];
  double e = 0.0;
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j)
      e +=
          d[static_cast<size_t>(i)] * h[static_cast<size_t>(i * k + j)] * d[static_cast<size_t>(j)];
  return e;
}

TEST(Gptq, FactorIsTheCholeskyFactorOfTheDampedInverse) {
  constexpr int64_t n = 150;  // tiles of 64: two whole, one part
  std::vector<float> h =
      correlated_second_moments(n, 120, 3);  // fewer tokens than columns: singular
  h[5 * n + 5] = 0.0f;                       // a column never activated
  for (int64_t j = 0; j < n; ++j)
    h[static_cast<size_t>(5 * n + j)] = h[static_cast<size_t>(j * n + 5)] = 0.0f;
  const GptqFactor f = GptqFactor::of(h, n, 0.01);
  ASSERT_EQ(f.cols(), n);
  // The damped H: the dead column's diagonal 1, then 1% of the mean diagonal added.
  std::vector<double> damped(h.begin(), h.end());
  damped[5 * n + 5] = 1.0;
  double mean = 0.0;
  for (int64_t i = 0; i < n; ++i) mean += damped[static_cast<size_t>(i * n + i)];
  for (int64_t i = 0; i < n; ++i) damped[static_cast<size_t>(i * n + i)] += 0.01 * mean / n;
  // Uᵀ U H = I, U upper triangular with a positive diagonal.
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < i; ++j) EXPECT_EQ(f.row(i)[j], 0.0f);
    EXPECT_GT(f.row(i)[i], 0.0f);
  }
  std::vector<double> utu(static_cast<size_t>(n * n), 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = r; i < n; ++i)
      for (int64_t m = r; m < n; ++m)
        utu[static_cast<size_t>(i * n + m)] += static_cast<double>(f.row(r)[i]) * f.row(r)[m];
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double v = 0.0;
      for (int64_t m = 0; m < n; ++m)
        v += utu[static_cast<size_t>(i * n + m)] * damped[static_cast<size_t>(m * n + j)];
      worst = std::max(worst, std::fabs(v - (i == j ? 1.0 : 0.0)));
    }
  }
  EXPECT_LT(worst, 1e-3);
}

TEST(Gptq, RefusesWhatAreNoSecondMoments) {
  // An off-diagonal larger than the diagonal: no second moments of any x (not positive definite).
  try {
    GptqFactor::of(std::vector<float>{1.0f, 5.0f, 5.0f, 1.0f}, 2);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not positive definite"), std::string::npos) << e.what();
  }
  EXPECT_THROW(GptqFactor::of(std::vector<float>(15, 1.0f), 4), Error);
  const GptqFactor f = GptqFactor::of(correlated_second_moments(64, 200, 9), 64);
  std::vector<float> x(32, 1.0f);
  std::vector<uint8_t> y(*dtype_bytes(DType::Q4_0, 32));
  EXPECT_THROW(quantize_row_gptq(DType::Q4_0, x.data(), y.data(), 32, f),
               Error);  // 32 ≠ 64 columns
}

TEST(Gptq, LowersTheOutputErrorOnCorrelatedInputs) {
  constexpr int64_t k = 512;
  const std::vector<float> h = correlated_second_moments(k, 2048, 11);
  std::vector<float> importance(k);
  for (int64_t j = 0; j < k; ++j)
    importance[static_cast<size_t>(j)] = h[static_cast<size_t>(j * k + j)];
  const GptqFactor f = GptqFactor::of(h, k);
  const DType types[] = {DType::Q8_0,     DType::Q4_0,      DType::Q4_1,    DType::Q5_0,
                         DType::Q5_1,     DType::Q4_K,      DType::Q5_K,    DType::Q6_K,
                         DType::INT4_G32, DType::INT4_G128, DType::INT8_G64};
  for (DType t : types) {
    double e_weighted = 0.0, e_gptq = 0.0;
    for (uint32_t row = 0; row < 8; ++row) {
      const std::vector<float> x = gaussian(k, 100 + row);
      std::vector<uint8_t> weighted(*dtype_bytes(t, k)), gptq(weighted.size());
      quantize_weight_row(t, x.data(), weighted.data(), k, importance.data());
      quantize_row_gptq(t, x.data(), gptq.data(), k, f);
      e_weighted += output_error(t, x, weighted, h);
      e_gptq += output_error(t, x, gptq, h);
    }
    // Measured: GPTQ's error is 0.027 (Q5_0) to 0.043 (Q5_K) of the importance-weighted
    // quantizer's (inputs of 8 factors and a little noise: the later columns can cancel
    // almost all of an earlier one's error).
    EXPECT_LT(e_gptq, 0.1 * e_weighted) << dtype_name(t);
  }
}

// GPTQ's act-order quantizes the columns whose H_jj is largest first (ties in column order), on
// H's rows and columns taken in that order; the affine groups' rules hold in every fit.
TEST(Gptq, ActOrderAndTheAffineRules) {
  constexpr int64_t k = 256;
  const std::vector<float> h = correlated_second_moments(k, 1024, 17);
  const std::vector<int32_t> order = act_order(h, k);
  for (int64_t i = 1; i < k; ++i) {
    const float a = h[static_cast<size_t>(order[i - 1] * (k + 1))];
    const float b = h[static_cast<size_t>(order[i] * (k + 1))];
    EXPECT_TRUE(a > b || (a == b && order[i - 1] < order[i])) << i;
  }
  const std::vector<float> p = permuted_moments(h, order);
  EXPECT_EQ(p[3 * k + 7], h[static_cast<size_t>(order[3] * k + order[7])]);
  EXPECT_THROW(act_order(std::vector<float>(10, 1.0f), 3), Error);
  // On correlated inputs whose columns span two orders of magnitude, quantizing the large ones
  // first lowers the output error (measured: 0.51 of it in order, INT4_G64).
  {
    const GptqFactor in_order = GptqFactor::of(h, k), acted = GptqFactor::of(p, k);
    double e_order = 0.0, e_act = 0.0;
    for (uint32_t row = 0; row < 8; ++row) {
      const std::vector<float> x = gaussian(k, 100 + row);
      std::vector<float> xp(k);
      for (int64_t j = 0; j < k; ++j) xp[static_cast<size_t>(j)] = x[static_cast<size_t>(order[j])];
      std::vector<uint8_t> a(*dtype_bytes(DType::INT4_G64, k)), b(a.size());
      quantize_row_gptq(DType::INT4_G64, x.data(), a.data(), k, in_order);
      quantize_row_gptq(DType::INT4_G64, xp.data(), b.data(), k, acted);
      e_order += output_error(DType::INT4_G64, x, a, h);
      e_act += output_error(DType::INT4_G64, xp, b, p);
    }
    EXPECT_LT(e_act, 0.8 * e_order);
  }

  // Every rule's groups, by GPTQ: scales f16, offsets what the rule allows.
  const GptqFactor f = GptqFactor::of(h, k);
  const std::vector<float> x = gaussian(k, 33);
  for (const AffineRule rule : {AffineRule::ZeroPoint, AffineRule::ZeroPointFromOne,
                                AffineRule::SymmetricZero, AffineRule::HalfBias}) {
    for (const DType t : {DType::INT4_G64, DType::INT8_G32}) {
      std::vector<uint8_t> y(*dtype_bytes(t, k));
      quantize_row_gptq(t, x.data(), y.data(), k, f, rule);
      const int qmax = affine_int_format(t)->bits == 4 ? 15 : 255;
      const int group = affine_int_format(t)->group;
      for (int64_t g = 0; g < k / group; ++g) {
        // A group's scale and offset: the first two floats of its block.
        float sb[2];
        std::memcpy(sb, y.data() + g * *dtype_bytes(t, static_cast<uint64_t>(group)), 8);
        const float scale = sb[0], bias = sb[1];
        EXPECT_EQ(f16_to_f32(f32_to_f16(scale)), scale);
        EXPECT_GT(scale, 0.0f);
        if (rule == AffineRule::HalfBias) {
          EXPECT_EQ(f16_to_f32(f32_to_f16(bias)), bias);
          continue;
        }
        const long z = std::lround(-bias / scale);
        EXPECT_EQ(-scale * static_cast<float>(z), bias);
        EXPECT_LE(z, qmax);
        EXPECT_GE(z, rule == AffineRule::ZeroPointFromOne ? 1 : 0);
        if (rule == AffineRule::SymmetricZero) {
          EXPECT_EQ(z, (qmax + 1) / 2);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern::quant
