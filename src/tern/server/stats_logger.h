// vLLM's periodic engine log (its LoggingStatLogger): every interval in which the engine ran,
// one line with the prompt and generation throughput since the last line, the running and
// waiting sequences, KV-cache usage and the prefix-cache hit rate; with speculative decoding a
// second line with the interval's acceptance (vLLM's "SpecDecoding metrics").
#pragma once

#include <string>

#include "tern/engine/llm_engine.h"

namespace tern::server {

class StatsLogger {
 public:
  // interval_seconds <= 0: never logs.
  explicit StatsLogger(double interval_seconds) : interval_(interval_seconds) {}

  // After an engine step: writes the lines to stderr when the interval has passed since the
  // last ones and tokens were processed in it.
  void observe(const EngineStats& stats, double now);

  // The lines for the change from `before` to `after` over `seconds` (empty when nothing ran).
  static std::string lines(const EngineStats& before, const EngineStats& after, double seconds);

 private:
  double interval_;
  double last_time_ = -1.0;
  EngineStats last_;
};

}  // namespace tern::server
