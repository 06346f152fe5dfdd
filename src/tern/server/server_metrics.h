// The server's Prometheus metrics, with vLLM's meanings, names and model_name label, so the
// routers, autoscalers and dashboards built for vLLM read tern unchanged. The engine thread
// records a request's latencies as its outputs come; /metrics renders them with the engine's
// gauges and counters (EngineStats) in the Prometheus text format.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
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

// The names /metrics gives what vLLM also measures (serve --metrics-compat): vLLM's own
// (`vllm:num_requests_waiting`, …), which the Gateway API Inference Extension's endpoint
// picker, llm-d, production-stack and KEDA's queries read by name; `tern:` and the same
// rest; or both. What only tern measures (KV transfer, cache capacity) is `tern:` always.
enum class MetricNames { Both, Vllm, Tern };
// "both", "vllm" or "tern"; nullopt for anything else.
std::optional<MetricNames> parse_metric_names(const std::string& name);

class MetricsPage;  // server_metrics.cpp: one prefix's families of the page

class ServerMetrics {
 public:
  explicit ServerMetrics(int64_t max_model_len, MetricNames names = MetricNames::Both);

  // Seconds between two tokens of one request.
  void observe_inter_token_latency(double seconds);
  // A request that ended (finished_reason: stop, length or abort) with its engine timestamps.
  void observe_finished(const RequestMetrics& metrics, const std::string& finished_reason);
  // A request refused with 503 because --max-waiting-requests requests were waiting already.
  void count_rejected_queue_full();

  // The whole /metrics page. `model_name` is the served model name. The recorded histograms
  // are copied under the lock and formatted after it, so a scrape (the endpoint picker polls
  // every 50 ms) holds the engine thread up for a copy of a few hundred numbers at most.
  std::string render(const std::string& model_name, const EngineStats& stats) const;

 private:
  struct Recorded {
    Histogram time_to_first_token, inter_token_latency, e2e_latency, queue_time;
    Histogram time_per_output_token;  // per request: its decode time / (generated tokens - 1)
    Histogram prompt_tokens, generation_tokens;
    Histogram kv_transfer_seconds;            // a decode instance's pulls of prompts' KV
    std::map<std::string, int64_t> finished;  // by finished_reason
    int64_t rejected_queue_full = 0;
  };
  // What vLLM measures too, under the page's prefix (vllm: adds vLLM's older names that
  // readers still use: gpu_cache_usage_perc, time_per_output_token_seconds).
  static void render_shared(MetricsPage& page, const EngineStats& stats, const Recorded& recorded);
  // What only tern measures (a tern: page).
  static void render_tern_only(MetricsPage& page, const EngineStats& stats,
                               const Recorded& recorded);

  MetricNames names_;
  mutable std::mutex mutex_;
  Recorded recorded_;  // guarded by mutex_
};

// Pieces of the Prometheus text format, shared with tern router's /metrics: a sample's number,
// an escaped label value, and the # HELP / # TYPE lines of a metric.
std::string prometheus_number(double v);
std::string prometheus_label_value(const std::string& s);
void prometheus_header(std::string& out, const std::string& name, const char* type,
                       const char* help);

}  // namespace tern::server
