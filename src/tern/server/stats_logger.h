// vLLM's periodic engine log (its LoggingStatLogger): every interval in which the engine ran,
// one line with the prompt and generation throughput since the last line, the running and
// waiting sequences, KV-cache usage and the prefix-cache hit rate; with speculative decoding a
// second line with the interval's acceptance (vLLM's "SpecDecoding metrics"), or why nothing
// was drafted. Steps far slower than their shape ran before get a warning, at most once a
// minute: a contended machine otherwise only shows as throughput that collapsed.
#pragma once

#include <functional>
#include <string>

#include "tern/engine/llm_engine.h"

namespace tern::server {

class StatsLogger {
 public:
  using Sink = std::function<void(const std::string&)>;
  // interval_seconds <= 0: never logs. `sink` gets the lines (default: stderr).
  explicit StatsLogger(double interval_seconds, Sink sink = {});

  // After an engine step: writes the lines when the interval has passed since the last ones
  // and tokens were processed in it.
  void observe(const EngineStats& stats, double now);

  // The lines for the change from `before` to `after` over `seconds` (empty when nothing ran).
  static std::string lines(const EngineStats& before, const EngineStats& after, double seconds);
  // A warning when the steps from `before` to `after` took more than kSlowStepFactor times the
  // fastest their shapes ran before (empty otherwise).
  static std::string slow_step_warning(const EngineStats& before, const EngineStats& after);

  static constexpr double kSlowStepFactor = 10.0;
  static constexpr int64_t kSlowStepMinSteps = 4;          // fewer are no evidence
  static constexpr double kSlowStepWarningSeconds = 60.0;  // at most one warning this often

 private:
  double interval_;
  Sink sink_;
  double last_time_ = -1.0;
  double last_warning_time_ = -1.0;
  EngineStats last_;
};

}  // namespace tern::server
