// The statistics llama-perplexity reports, defined as it defines them, so tern's numbers read
// like llama.cpp's: a mean with the standard error of the mean, a covariance of two means,
// linearly interpolated percentiles.
#pragma once

#include <cstdint>
#include <span>

namespace tern {

struct Estimate {
  double value = 0.0;
  double uncertainty = 0.0;  // one standard error
};

// The mean of `count` values from their sum and sum of squares, ± sqrt((E[x²] − E[x]²) /
// (count − 1)); the uncertainty is 0 for 10 values or fewer, or a variance that rounds to ≤ 0.
Estimate mean_and_uncertainty(double sum, double sum2, int64_t count);

// The covariance of the means of a and b: (E[ab] − E[a]E[b]) / (count − 1); 0 under 10 values.
double covariance_of_means(double sum_a, double sum_b, double sum_ab, int64_t count);

// Of sorted values: fraction in [0, 1] interpolated between the two nearest ranks of
// fraction · (n − 1); the first / last value outside (0, 1). `sorted` is not empty.
double percentile(std::span<const double> sorted, double fraction);

// The middle value, or the mean of the two middle ones. `sorted` is not empty.
double median(std::span<const double> sorted);

}  // namespace tern
