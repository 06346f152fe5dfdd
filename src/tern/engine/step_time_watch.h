// How much slower the engine's forwards run than the same forwards ran before: the fastest a
// step of its shape (tokens computed, tokens attended) has run is what the model costs on this
// machine; steps many times slower mean contended cores (other processes, --threads beyond the
// free cores) or swapped-out weights, which the server's log then says.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

namespace tern {

// Cumulative, for EngineStats: the steps whose shape had run before, their seconds, and the
// fastest seconds each shape had run in before them.
struct StepTimes {
  int64_t steps = 0;
  double seconds = 0.0;
  double reference_seconds = 0.0;
};

class StepTimeWatch {
 public:
  // A forward computing `num_tokens` tokens, attending `context_tokens` in all (each
  // sequence's tokens up to its last computed one), took `seconds`.
  void record(int64_t num_tokens, int64_t context_tokens, double seconds);
  const StepTimes& times() const { return times_; }

 private:
  // Shapes whose costs differ by at most about a fifth share a bucket: tokens exact up to 16,
  // then both counts four buckets per power of two.
  static int32_t bucket(int64_t n);
  std::map<std::pair<int32_t, int32_t>, double> fastest_;  // (tokens, context) bucket → seconds
  StepTimes times_;
};

}  // namespace tern
