// llama-perplexity's statistics on small known samples.
#include "tern/eval/eval_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tern {
namespace {

TEST(PerplexityStats, LlamaCppsDefinitions) {
  // mean ± sqrt((E[x²] − E[x]²) / (n − 1)), 0 for 10 values or fewer.
  std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  double sum = 0, sum2 = 0;
  for (double v : x) sum += v, sum2 += v * v;
  const Estimate e = mean_and_uncertainty(sum, sum2, 11);
  EXPECT_DOUBLE_EQ(e.value, 6.0);
  EXPECT_NEAR(e.uncertainty, std::sqrt(10.0 / 10.0), 1e-12);  // population variance 10
  EXPECT_EQ(mean_and_uncertainty(sum - 11, sum2 - 121, 10).uncertainty, 0.0);
  EXPECT_DOUBLE_EQ(covariance_of_means(sum, sum, sum2, 11), 1.0);
  EXPECT_EQ(covariance_of_means(1, 1, 1, 9), 0.0);
  // Percentiles interpolate fraction · (n − 1); the median averages the middle two.
  const std::vector<double> sorted = {0, 10, 20, 30};
  EXPECT_DOUBLE_EQ(percentile(sorted, 0.5), 15.0);
  EXPECT_DOUBLE_EQ(percentile(sorted, 0.1), 3.0);
  EXPECT_NEAR(percentile(sorted, 0.999), 29.97, 1e-9);
  EXPECT_DOUBLE_EQ(percentile(sorted, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(percentile(sorted, 1.0), 30.0);
  EXPECT_DOUBLE_EQ(median(sorted), 15.0);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{1, 7, 9}), 7.0);
}

}  // namespace
}  // namespace tern
