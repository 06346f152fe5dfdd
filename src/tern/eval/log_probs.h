// Log-probabilities of a row of logits as perplexity and KL divergence use them. Both sides of a
// KL divergence (the base file's rows and the model under test's) are the same f32 values of
// the same function, so a model compared with itself gives exactly 0.
#pragma once

#include <cstdint>

namespace tern {

// log Σ exp(logits): the maximum subtracted, the sum of exponentials in double.
// logits: [n]
double log_sum_exp(const float* logits, int64_t n);

// The f32 log-probability of a logit under a row's log_sum_exp.
inline float log_prob(float logit, double lse) {
  return static_cast<float>(static_cast<double>(logit) - lse);
}

// log_softmax of a row into f32. logits, out: [n] (may be the same array)
void log_probs_row(const float* logits, int64_t n, float* out);

}  // namespace tern
