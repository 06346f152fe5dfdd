// StepTimeWatch: the fastest seconds per step shape, and the running sums against them.
#include "tern/engine/step_time_watch.h"

#include <algorithm>
#include <cmath>

namespace tern {

int32_t StepTimeWatch::bucket(int64_t n) {
  if (n <= 16) return static_cast<int32_t>(std::max<int64_t>(n, 0));
  // 16 + 4 per octave above 16: floor(4 · log2(n / 16)).
  return 16 + static_cast<int32_t>(std::floor(4.0 * std::log2(static_cast<double>(n) / 16.0)));
}

void StepTimeWatch::record(int64_t num_tokens, int64_t context_tokens, double seconds) {
  if (!(seconds >= 0.0)) return;
  const auto [it, first] =
      fastest_.try_emplace({bucket(num_tokens), bucket(context_tokens)}, seconds);
  if (first) return;  // nothing to compare with: the first run of a shape may page weights in
  ++times_.steps;
  times_.seconds += seconds;
  times_.reference_seconds += it->second;
  it->second = std::min(it->second, seconds);
}

}  // namespace tern
