// The server's Prometheus metrics, named as vLLM's with a `tern:` prefix and a model_name label,
// so dashboards and scrapers built for vLLM read tern unchanged. The engine thread records a
// request's latencies as its outputs come; /metrics renders them with the engine's gauges and
// counters (EngineStats) in the Prometheus text format.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tern/engine/llm_engine.h"

namespace tern::server {

// A Prometheus histogram: cumulative counts per upper bound, plus +Inf, sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // `name`_bucket{labels,le="…"} lines, then _sum and _count. `labels` is `model_name="x"`.
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0.0;
  int64_t count_ = 0;
};

// vLLM's 1-2-5 series (1, 2, 5, 10, 20, 50, …) up to `max_value`, for token-count histograms.
std::vector<double> one_two_five_buckets(int64_t max_value);

class ServerMetrics {
 public:
  explicit ServerMetrics(int64_t max_model_len);

  // Seconds between two tokens of one request.
  void observe_inter_token_latency(double seconds);
  // A request that ended (finished_reason: stop, length or abort) with its engine timestamps.
  void observe_finished(const RequestMetrics& metrics, const std::string& finished_reason);

  // The whole /metrics page. `model_name` is the served model name.
  std::string render(const std::string& model_name, const EngineStats& stats) const;

 private:
  mutable std::mutex mutex_;
  Histogram time_to_first_token_, inter_token_latency_, e2e_latency_, queue_time_;
  Histogram prompt_tokens_, generation_tokens_;
  Histogram kv_transfer_seconds_;            // a decode instance's pulls of prompts' KV
  std::map<std::string, int64_t> finished_;  // by finished_reason
};

// Pieces of the Prometheus text format, shared with tern router's /metrics: a sample's number,
// an escaped label value, and the # HELP / # TYPE lines of a metric.
std::string prometheus_number(double v);
std::string prometheus_label_value(const std::string& s);
void prometheus_header(std::string& out, const std::string& name, const char* type,
                       const char* help);

}  // namespace tern::server
