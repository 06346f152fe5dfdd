// llama-perplexity's statistics (tools/perplexity/perplexity.cpp: mean_and_uncertainty,
// covariance, percentile), written out again.
#include "tern/eval/eval_stats.h"

#include <algorithm>
#include <cmath>

namespace tern {

Estimate mean_and_uncertainty(double sum, double sum2, int64_t count) {
  if (count < 1) return {};
  const double n = static_cast<double>(count);
  const double mean = sum / n;
  const double variance = sum2 / n - mean * mean;
  return {mean, variance > 0 && count > 10 ? std::sqrt(variance / (n - 1)) : 0.0};
}

double covariance_of_means(double sum_a, double sum_b, double sum_ab, int64_t count) {
  if (count < 10) return 0.0;
  const double n = static_cast<double>(count);
  return (sum_ab / n - (sum_a / n) * (sum_b / n)) / (n - 1);
}

double percentile(std::span<const double> sorted, double fraction) {
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  const double rank = fraction * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(rank);
  const double t = rank - static_cast<double>(below);
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return (1 - t) * sorted[below] + t * sorted[above];
}

double median(std::span<const double> sorted) {
  const size_t n = sorted.size();
  return n % 2 == 0 ? 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]) : sorted[n / 2];
}

}  // namespace tern
