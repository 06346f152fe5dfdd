// Measured seconds of a model's forward by the number of tokens it runs, so the drafting
// policy can price a verify step of B·(1 + K) tokens and a draft step of B tokens. Each size
// keeps a moving average of its measurements; sizes never measured are interpolated.
#pragma once

#include <cstdint>
#include <map>

namespace tern {

class ForwardCosts {
 public:
  // A forward of `num_tokens` tokens took `seconds`.
  void record(int64_t num_tokens, double seconds);
  // Seconds a forward of `num_tokens` is expected to take: linear between the nearest measured
  // sizes, the smallest one's below them, and beyond the largest along the slope of the last
  // two (never falling). 0 when nothing was measured.
  double estimate(int64_t num_tokens) const;
  // The same, but beyond the largest measured size at that size's cost per token: never less
  // than a forward of `num_tokens` costs, since the cost per token only falls as a forward grows
  // (its weights are read once). What a time limit on a step must go by: decode-only
  // measurements are nearly flat in the tokens, and extrapolating their slope to a prompt's
  // chunk would price hundreds of tokens like a few.
  double upper_estimate(int64_t num_tokens) const;
  bool empty() const { return by_size_.empty(); }

 private:
  // Sizes up to 64 are exact; above, rounded to 8 steps per power of two.
  static int64_t bucket(int64_t num_tokens);
  std::map<int64_t, double> by_size_;  // bucket → moving average of seconds
};

}  // namespace tern
