// The lattice types' fits: the neighbour tables are what they claim (every entry maps to itself,
// every point off the grid lists its nearest entries), the round trip of Gaussian rows is within
// a measured bound and well below a naive fit's (so a broken search fails), and an importance
// vector lowers the weighted error where it is heavy.
#include "tern/blocks/lattice_fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "tern/blocks/block_layouts.h"
#include "tern/blocks/lattice_search.h"
#include "tern/blocks/quantize_row.h"

namespace tern {
namespace {

using testing::dequantized;
using testing::gaussian;
using testing::relative_rms_error;

struct LatticeCase {
  DType dtype;
  LatticeGrid grid;
  float factor;     // grid value × factor: the magnitude under the sub-block's scale
  int sub;          // elements under one scale
  bool even_signs;  // an even count of each 8 negative (the eighth sign bit not stored)
  double bound;     // relative RMS of the round trip (8192 N(0, 1), importance 1): measured + 3%
  // The naive fit's relative RMS must exceed ours by this factor (measured: 1.05-1.08 for the
  // signed types, whose naive fit keeps float scales and searches the whole grid; 1.3 for IQ1).
  double naive;
};

const LatticeCase kCases[] = {
    {DType::IQ3_XXS, LatticeGrid::Iq3Xxs, 0.25f, 32, true, 0.184, 1.04},   // 0.1790, naive 0.1883,
    {DType::IQ3_S, LatticeGrid::Iq3S, 1.0f, 32, false, 0.133, 1.04},       // 0.1292, naive 0.1354,
    {DType::IQ2_XXS, LatticeGrid::Iq2Xxs, 0.125f, 32, true, 0.343, 1.05},  // 0.3333, naive 0.3534,
    {DType::IQ2_XS, LatticeGrid::Iq2Xs, 0.125f, 16, true, 0.296, 1.05},    // 0.2878, naive 0.3046,
    {DType::IQ2_S, LatticeGrid::Iq2S, 0.125f, 16, false, 0.247, 1.06},     // 0.2396, naive 0.2577,
    {DType::IQ1_S, LatticeGrid::Iq1, 1.0f, 32, false, 0.464, 1.3},         // 0.4509, naive 0.6065,
    {DType::IQ1_M, LatticeGrid::Iq1, 1.0f, 16, false, 0.432, 1.25},        // 0.4198, naive 0.5473,
};

std::vector<uint8_t> fitted(DType t, const std::vector<float>& x, const float* importance) {
  std::vector<uint8_t> q(*dtype_bytes(t, x.size()));
  fit_lattice_row(t, x.data(), q.data(), static_cast<int64_t>(x.size()), importance);
  return q;
}

TEST(LatticeSearch, EveryEntryIsOnTheGridAndNeighboursAreNearest) {
  for (LatticeGrid g : {LatticeGrid::Iq3Xxs, LatticeGrid::Iq3S, LatticeGrid::Iq2Xxs,
                        LatticeGrid::Iq2Xs, LatticeGrid::Iq2S, LatticeGrid::Iq1}) {
    const Lattice& lattice = Lattice::of(g);
    const int n = lattice.group();
    int point[8];
    for (int i = 0; i < lattice.entries(); ++i) {
      for (int e = 0; e < n; ++e) point[e] = lattice.level(i, e);
      ASSERT_EQ(lattice.entry_of(point), i);
      EXPECT_TRUE(lattice.neighbours(point).empty());
    }
    // Points off the grid: the first neighbour is at the least squared distance of all entries.
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> level(0, lattice.levels() - 1);
    int off = 0;
    for (int trial = 0; trial < 2000; ++trial) {
      for (int e = 0; e < n; ++e) point[e] = level(rng);
      if (lattice.entry_of(point) >= 0) continue;
      ++off;
      auto d2 = [&](int i) {
        int d = 0;
        for (int e = 0; e < n; ++e)
          d += (lattice.level(i, e) - point[e]) * (lattice.level(i, e) - point[e]);
        return d;
      };
      int nearest = INT32_MAX;
      for (int i = 0; i < lattice.entries(); ++i) nearest = std::min(nearest, d2(i));
      const auto list = lattice.neighbours(point);
      ASSERT_FALSE(list.empty());
      EXPECT_EQ(d2(list[0]), nearest);
      for (uint16_t i : list) EXPECT_GE(d2(i), nearest);
    }
    EXPECT_GT(off, 100);
  }
}

// A naive fit of the same grid, in floats (no f16 scale, no 4-bit sub-block scales; where the
// format stores 7 signs of 8, the smallest element of an odd group takes the wrong one): each
// sub-block's scale puts its largest magnitude on the top level, and each group
// takes the grid entry nearest it by exhaustive search. What a search that only rounds gets.
// (The 1-bit grid is signed: its values −1, 0, 1 shifted by +1/8, no signs of their own.)
std::vector<float> naive_fit(const LatticeCase& c, const std::vector<float>& x) {
  const Lattice& lattice = Lattice::of(c.grid);
  const int g = lattice.group();
  const bool signed_grid = c.grid == LatticeGrid::Iq1;
  auto value = [&](int entry, int e) {
    const auto v = static_cast<float>(lattice.value(lattice.level(entry, e))) * c.factor;
    return signed_grid ? v + 0.125f : v;
  };
  const float top =
      signed_grid ? 1.125f : static_cast<float>(lattice.value(lattice.levels() - 1)) * c.factor;
  // sign[i]: the sign element i is stored with.
  std::vector<float> sign(x.size());
  for (size_t i = 0; i < x.size(); ++i) sign[i] = x[i] < 0.0f ? -1.0f : 1.0f;
  if (c.even_signs)
    for (size_t l = 0; l < x.size(); l += 8) {
      int negative = 0;
      size_t smallest = l;
      for (size_t i = l; i < l + 8; ++i) {
        negative += x[i] < 0.0f;
        if (std::fabs(x[i]) < std::fabs(x[smallest])) smallest = i;
      }
      if (negative % 2 != 0) sign[smallest] = -sign[smallest];
    }
  std::vector<float> y(x.size());
  for (size_t s = 0; s < x.size(); s += static_cast<size_t>(c.sub)) {
    float max = 0.0f;
    for (int e = 0; e < c.sub; ++e) max = std::max(max, std::fabs(x[s + e]));
    const float scale = max / top;
    for (int k = 0; k < c.sub; k += g) {
      auto target = [&](int e) {
        return signed_grid ? x[s + k + e] : x[s + k + e] * sign[s + k + e];
      };
      float best = FLT_MAX;
      int best_i = 0;
      for (int i = 0; i < lattice.entries(); ++i) {
        float err = 0.0f;
        for (int e = 0; e < g; ++e) {
          const float r = target(e) - scale * value(i, e);
          err += r * r;
        }
        if (err < best) {
          best = err;
          best_i = i;
        }
      }
      for (int e = 0; e < g; ++e) {
        const float m = scale * value(best_i, e);
        y[s + k + e] = signed_grid ? m : sign[s + k + e] * m;
      }
    }
  }
  return y;
}

TEST(LatticeFit, RoundTripBeatsANaiveFit) {
  const std::vector<float> x = gaussian(8192, 11);
  for (const LatticeCase& c : kCases) {
    // Importance 1 everywhere: the weights closest to the plain squared error that RMS measures.
    const std::vector<float> ones(x.size(), 1.0f);
    const std::vector<float> y = dequantized(c.dtype, fitted(c.dtype, x, ones.data()).data(), 8192);
    const double err = relative_rms_error(y, x);
    const double naive = relative_rms_error(naive_fit(c, x), x);
    const double plain =
        relative_rms_error(dequantized(c.dtype, fitted(c.dtype, x, nullptr).data(), 8192), x);
    std::printf("%s: relative RMS %.4f (no importances: %.4f), naive %.4f\n",
                std::string(dtype_name(c.dtype)).c_str(), err, plain, naive);
    EXPECT_LE(err, c.bound) << dtype_name(c.dtype);
    EXPECT_LE(err * c.naive, naive) << dtype_name(c.dtype);
    // The row quantizer is this fit without importances.
    std::vector<uint8_t> row(*dtype_bytes(c.dtype, 8192));
    quantize_row(c.dtype, x.data(), row.data(), 8192);
    EXPECT_EQ(row, fitted(c.dtype, x, nullptr)) << dtype_name(c.dtype);
  }
}

// A row whose few heavy columns (importance 1000× the rest) are fitted closer with the
// importances than without.
TEST(LatticeFit, ImportanceLowersTheWeightedError) {
  const std::vector<float> x = gaussian(4096, 12);
  std::vector<float> imp(4096, 1.0f);
  for (size_t j = 5; j < imp.size(); j += 61) imp[j] = 1000.0f;
  auto weighted_error = [&](DType t, const std::vector<uint8_t>& q) {
    const std::vector<float> y = dequantized(t, q.data(), 4096);
    double err = 0.0;
    for (size_t j = 0; j < x.size(); ++j) err += imp[j] * (x[j] - y[j]) * (x[j] - y[j]);
    return err;
  };
  for (const LatticeCase& c : kCases) {
    const double plain = weighted_error(c.dtype, fitted(c.dtype, x, nullptr));
    const double weighted = weighted_error(c.dtype, fitted(c.dtype, x, imp.data()));
    std::printf("%s: weighted error %.1f with the importances, %.1f without\n",
                std::string(dtype_name(c.dtype)).c_str(), weighted, plain);
    EXPECT_LT(weighted, 0.5 * plain) << dtype_name(c.dtype);
  }
}

// All-zero, one-sided and wide-ranging super-blocks decode close, never to NaN.
TEST(LatticeFit, EdgeRows) {
  for (const LatticeCase& c : kCases) {
    std::vector<float> x = gaussian(1024, 13);
    for (int i = 0; i < 256; ++i) x[static_cast<size_t>(i)] = 0.0f;
    for (int i = 256; i < 288; ++i)
      x[static_cast<size_t>(i)] = 1.0f + std::fabs(x[static_cast<size_t>(i)]);
    for (int i = 512; i < 768; ++i) x[static_cast<size_t>(i)] *= 1000.0f;
    const std::vector<float> y = dequantized(c.dtype, fitted(c.dtype, x, nullptr).data(), 1024);
    for (int i = 0; i < 256; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], 0.0f) << dtype_name(c.dtype);
    for (float v : y) ASSERT_TRUE(std::isfinite(v)) << dtype_name(c.dtype);
    const std::vector<float> big(x.begin() + 512, x.begin() + 768),
        big_y(y.begin() + 512, y.begin() + 768);
    EXPECT_LT(relative_rms_error(big_y, big), 1.5 * c.bound) << dtype_name(c.dtype);
  }
}

}  // namespace
}  // namespace tern
