// log_sum_exp / log_probs_row: one fixed order of summation, so a row's values do not depend
// on the batch or the thread that computes them.
#include "tern/eval/log_probs.h"

#include <cmath>

namespace tern {

double log_sum_exp(const float* logits, int64_t n) {
  float max = logits[0];
  for (int64_t i = 1; i < n; ++i) max = std::fmax(max, logits[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  return static_cast<double>(max) + std::log(sum);
}

void log_probs_row(const float* logits, int64_t n, float* out) {
  const double lse = log_sum_exp(logits, n);
  for (int64_t i = 0; i < n; ++i) out[i] = log_prob(logits[i], lse);
}

}  // namespace tern
