// Sampler: candidates are narrowed by top-k (partial sort), turned into probabilities at the
// temperature, cut by top-p, then one uniform draw picks among what is left.
#include "tern/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tern/core/error.h"

namespace tern {

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    throw Error("temperature must be a finite number >= 0, got " + std::to_string(temperature));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    throw Error("top_p must be in (0, 1], got " + std::to_string(top_p));
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  params_.validate();
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.greedy() || logits.size() <= 1) return argmax(logits);
  const size_t vocab = logits.size();
  candidates_.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) candidates_[i] = {logits[i], static_cast<int32_t>(i)};
  // Most likely first; ties by id, so the order (and the draw) never depends on the sort.
  auto more_likely = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t n = vocab;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab) n = static_cast<size_t>(params_.top_k);
  if (n < vocab || params_.top_p < 1.0f) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(n),
                      candidates_.end(), more_likely);
  }
  // Probabilities of the n kept, relative to the best (first when sorted; find it otherwise).
  float max_logit = candidates_[0].first;
  for (size_t i = 1; i < n; ++i) max_logit = std::max(max_logit, candidates_[i].first);
  const double inv_t = 1.0 / params_.temperature;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double p = std::exp((static_cast<double>(candidates_[i].first) - max_logit) * inv_t);
    candidates_[i].first = static_cast<float>(p);
    total += p;
  }
  if (params_.top_p < 1.0f) {
    // The smallest prefix (by probability, already sorted) whose mass reaches top_p.
    double mass = 0.0;
    size_t keep = 0;
    while (keep < n) {
      mass += candidates_[keep].first;
      ++keep;
      if (mass >= params_.top_p * total) break;
    }
    n = keep;
    total = mass;
  }
  // 53 random bits → [0, 1), the same on every standard library.
  const double u = static_cast<double>(rng_() >> 11) * 0x1p-53 * total;
  double acc = 0.0;
  for (size_t i = 0; i < n; ++i) {
    acc += candidates_[i].first;
    if (u < acc) return candidates_[i].second;
  }
  return candidates_[n - 1].second;
}

}  // namespace tern
