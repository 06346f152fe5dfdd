// Picking the next token from a row of logits: greedy at temperature 0, else temperature,
// top-k and top-p (nucleus) with a seeded RNG, so a seed reproduces a run exactly.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace tern {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax, lowest id on ties)
  int32_t top_k = 0;         // keep the k most likely tokens; 0 or negative: all
  float top_p = 1.0f;        // keep the smallest set whose probability reaches p; 1: all
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
  // Throws tern::Error naming the field for a negative temperature or top_p outside (0, 1].
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // logits: [vocab]. Allocates only on the first call (its scratch grows to the vocabulary).
  int32_t sample(std::span<const float> logits);

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // [vocab]: (logit, id)
};

// The index of the largest value, the lowest on ties.
int32_t argmax(std::span<const float> logits);

}  // namespace tern
