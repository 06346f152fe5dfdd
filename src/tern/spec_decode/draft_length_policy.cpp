// choose_draft_length: every K up to max_k and every prefix of the candidates, O(max_k · B)
// cost estimates per step.
#include "tern/spec_decode/draft_length_policy.h"

#include <algorithm>
#include <cmath>

namespace tern {

double expected_tokens(double alpha, int32_t k) {
  alpha = std::clamp(alpha, 0.0, 1.0);
  if (alpha >= 1.0) return k + 1.0;
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

DraftChoice choose_draft_length(std::span<const DraftCandidate> candidates, int64_t other_tokens,
                                int32_t max_k, const ForwardCosts& target,
                                const ForwardCosts* draft, double min_gain) {
  DraftChoice best;
  const int64_t b = static_cast<int64_t>(candidates.size());
  const double base_time = target.estimate(other_tokens + b);
  if (b == 0 || !(base_time > 0.0)) return best;
  const double base_rate = static_cast<double>(b) / base_time;
  for (int32_t k = 1; k <= max_k; ++k) {
    double tokens = static_cast<double>(b);
    int64_t verify_tokens = other_tokens + b;
    double catch_up = 0.0;
    int64_t drafting = 0;
    for (size_t m = 0; m < candidates.size(); ++m) {
      const DraftCandidate& c = candidates[m];
      const int32_t n = std::min(k, c.max_drafts);
      if (n <= 0) continue;
      const double gained = expected_tokens(c.acceptance, n);
      tokens += gained - 1.0;
      verify_tokens += n;
      // The lag's share of this step: the fraction of the sequence's remaining steps it is.
      const double steps_left = std::max(1.0, static_cast<double>(c.remaining) / gained);
      catch_up += 1.0 + static_cast<double>(std::max<int64_t>(c.lag, 1) - 1) / steps_left;
      ++drafting;
      double time = target.estimate(verify_tokens);
      if (draft)
        time += draft->estimate(static_cast<int64_t>(std::ceil(catch_up))) +
                (k - 1) * draft->estimate(drafting);
      const double gain = tokens / time / base_rate;
      if (gain > best.best_gain) {
        best.best_k = k;
        best.best_gain = gain;
      }
      if (gain > best.gain) {
        best.num_drafts = k;
        best.num_sequences = m + 1;
        best.gain = gain;
      }
    }
  }
  if (best.gain < min_gain) return {.best_k = best.best_k, .best_gain = best.best_gain};
  return best;
}

}  // namespace tern
