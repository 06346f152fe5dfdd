#include "tern/server/server_metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace tern::server {
namespace {

// vLLM's bucket boundaries (vllm/v1/metrics/loggers.py), so histograms merge with vLLM's.
const std::vector<double> kTimeToFirstTokenBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kInterTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                                       0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                                       7.5,  10.0,  20.0, 40.0,  80.0};
const std::vector<double> kRequestLatencyBuckets = {
    0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

// Prometheus numbers: integers without a decimal point (counters of any size read as counts),
// others in the shortest form that reads back as the same double (0.005, not
// 0.0050000000000000001), as Prometheus's own clients write them: dashboards select buckets by
// the text of `le`.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // The magnitude test comes first: casting a double past int64's range is undefined.
  if (std::abs(v) < 1e15 && v == std::trunc(v)) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Label values escape backslash, quote and newline.
std::string label_value(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, double value) {
  out += name + "{" + labels + "} " + number(value) + "\n";
}

}  // namespace

// The families of one page under one prefix: each family's # HELP and # TYPE lines, then its
// samples, every one with the page's labels (model_name) and its own.
class MetricsPage {
 public:
  MetricsPage(std::string& out, std::string prefix, const std::string& labels)
      : out_(out), prefix_(std::move(prefix)), labels_(labels) {}

  const std::string& prefix() const { return prefix_; }
  void family(const char* name, const char* type, const char* help) {
    header(out_, prefix_ + name, type, help);
  }
  // A sample of the family `name`; `more_labels` ("le=\"1\"", …) after the page's.
  void sample(const char* name, const std::string& more_labels, double v) {
    tern::server::sample(out_, prefix_ + name,
                         more_labels.empty() ? labels_ : labels_ + "," + more_labels, v);
  }
  void gauge(const char* name, const char* help, double v) { single(name, "gauge", help, v); }
  void counter(const char* name, const char* help, double v) { single(name, "counter", help, v); }
  void histogram(const char* name, const char* help, const Histogram& h) {
    family(name, "histogram", help);
    h.render(out_, prefix_ + name, labels_);
  }

 private:
  void single(const char* name, const char* type, const char* help, double v) {
    family(name, type, help);
    sample(name, {}, v);
  }
  std::string& out_;
  std::string prefix_;
  const std::string& labels_;
};

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  // No labels (tern router's histograms): `name_sum 1.5`, not `name_sum{} 1.5`.
  const std::string bucket_labels = labels.empty() ? std::string() : labels + ",";
  const std::string total_labels = labels.empty() ? std::string() : "{" + labels + "}";
  int64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    out += name + "_bucket{" + bucket_labels + "le=\"" + le + "\"} " + std::to_string(cumulative) +
           "\n";
  }
  out += name + "_sum" + total_labels + " " + number(sum_) + "\n";
  out += name + "_count" + total_labels + " " + std::to_string(count_) + "\n";
}

std::vector<double> one_two_five_buckets(int64_t max_value) {
  std::vector<double> out;
  for (int64_t scale = 1;; scale *= 10)
    for (int64_t m : {1, 2, 5}) {
      if (m * scale > max_value) return out;
      out.push_back(static_cast<double>(m * scale));
    }
}

std::optional<MetricNames> parse_metric_names(const std::string& name) {
  if (name == "both") return MetricNames::Both;
  if (name == "vllm") return MetricNames::Vllm;
  if (name == "tern") return MetricNames::Tern;
  return std::nullopt;
}

ServerMetrics::ServerMetrics(int64_t max_model_len, MetricNames names)
    : names_(names),
      recorded_{Histogram(kTimeToFirstTokenBuckets),
                Histogram(kInterTokenLatencyBuckets),
                Histogram(kRequestLatencyBuckets),
                Histogram(kRequestLatencyBuckets),
                Histogram(kInterTokenLatencyBuckets),
                Histogram(one_two_five_buckets(max_model_len)),
                Histogram(one_two_five_buckets(max_model_len)),
                Histogram(kTimeToFirstTokenBuckets),
                {}} {
  for (const char* reason : {"stop", "length", "abort"}) recorded_.finished[reason] = 0;
}

void ServerMetrics::observe_inter_token_latency(double seconds) {
  std::lock_guard lock(mutex_);
  recorded_.inter_token_latency.observe(seconds);
}

void ServerMetrics::count_rejected_queue_full() {
  std::lock_guard lock(mutex_);
  ++recorded_.rejected_queue_full;
}

void ServerMetrics::observe_finished(const RequestMetrics& m, const std::string& finished_reason) {
  std::lock_guard lock(mutex_);
  Recorded& r = recorded_;
  ++r.finished[finished_reason];
  if (m.first_token_time >= 0) r.time_to_first_token.observe(m.first_token_time - m.arrival_time);
  if (m.first_scheduled_time >= 0) r.queue_time.observe(m.first_scheduled_time - m.arrival_time);
  if (m.finished_time >= 0) r.e2e_latency.observe(m.finished_time - m.arrival_time);
  if (m.first_token_time >= 0 && m.last_token_time >= 0 && m.num_generation_tokens > 1)
    r.time_per_output_token.observe((m.last_token_time - m.first_token_time) /
                                    static_cast<double>(m.num_generation_tokens - 1));
  if (m.kv_transfer_seconds >= 0) r.kv_transfer_seconds.observe(m.kv_transfer_seconds);
  r.prompt_tokens.observe(static_cast<double>(m.num_prompt_tokens));
  r.generation_tokens.observe(static_cast<double>(m.num_generation_tokens));
}

std::string ServerMetrics::render(const std::string& model_name, const EngineStats& s) const {
  const Recorded recorded = [&] {
    std::lock_guard lock(mutex_);
    return recorded_;
  }();
  const std::string labels = "model_name=\"" + label_value(model_name) + "\"";
  std::string out;
  if (names_ != MetricNames::Tern) {
    MetricsPage vllm(out, "vllm:", labels);
    render_shared(vllm, s, recorded);
  }
  MetricsPage tern(out, "tern:", labels);
  if (names_ != MetricNames::Vllm) render_shared(tern, s, recorded);
  render_tern_only(tern, s, recorded);
  return out;
}

void ServerMetrics::render_shared(MetricsPage& page, const EngineStats& s, const Recorded& r) {
  const bool vllm = page.prefix() == "vllm:";
  page.gauge("num_requests_running", "Number of requests in model execution batches.",
             static_cast<double>(s.num_running));
  page.gauge("num_requests_waiting", "Number of requests waiting to be processed.",
             static_cast<double>(s.num_waiting));
  page.gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", s.kv_cache_usage);
  // vLLM 0.9's name of the same fraction; production-stack's router still reads it.
  if (vllm)
    page.gauge("gpu_cache_usage_perc",
               "KV-cache usage. 1 means 100 percent usage (vLLM's older name).", s.kv_cache_usage);
  // vLLM's cache_config_info: the configuration as labels, value 1. The endpoint picker reads
  // block_size and num_gpu_blocks (the device's blocks; tern's one cache).
  const std::string config = "block_size=\"" + std::to_string(s.block_size) + "\",cache_dtype=\"" +
                             std::string(kv_dtype_name(s.kv_cache_dtype)) + "\",";
  page.family("cache_config_info", "gauge", "Information of the KV cache configuration.");
  page.sample("cache_config_info",
              vllm
                  ? config + "enable_prefix_caching=\"" + (s.prefix_caching ? "True" : "False") +
                        "\",num_gpu_blocks=\"" + std::to_string(s.num_blocks) + "\""
                  : config + "num_blocks=\"" + std::to_string(s.num_blocks) +
                        "\",bytes_per_token=\"" + std::to_string(s.kv_cache_bytes_per_token) + "\"",
              1.0);
  page.counter("prompt_tokens_total", "Number of prefill tokens processed.",
               static_cast<double>(s.prompt_tokens));
  page.counter("generation_tokens_total", "Number of generation tokens processed.",
               static_cast<double>(s.generation_tokens));
  page.counter("prefix_cache_queries_total",
               "Prefix cache queries, in terms of number of queried tokens.",
               static_cast<double>(s.prefix_cache_queries));
  page.counter("prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
               static_cast<double>(s.prefix_cache_hits));
  page.counter("num_preemptions_total", "Cumulative number of preemption from the engine.",
               static_cast<double>(s.num_preemptions));
  if (s.speculative) {
    page.counter("spec_decode_num_drafts_total", "Number of spec decoding drafts.",
                 static_cast<double>(s.spec.num_drafts));
    page.counter("spec_decode_num_draft_tokens_total", "Number of draft tokens.",
                 static_cast<double>(s.spec.num_draft_tokens));
    page.counter("spec_decode_num_accepted_tokens_total", "Number of accepted tokens.",
                 static_cast<double>(s.spec.num_accepted_tokens));
    const char* per_position = "spec_decode_num_accepted_tokens_per_pos_total";
    page.family(per_position, "counter", "Accepted tokens per draft position.");
    for (size_t i = 0; i < s.spec.accepted_per_position.size(); ++i)
      page.sample(per_position, "position=\"" + std::to_string(i) + "\"",
                  static_cast<double>(s.spec.accepted_per_position[i]));
  }

  page.family("request_success_total", "counter", "Count of successfully processed requests.");
  for (const auto& [reason, count] : r.finished)
    page.sample("request_success_total", "finished_reason=\"" + label_value(reason) + "\"",
                static_cast<double>(count));
  page.histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                 r.time_to_first_token);
  page.histogram("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                 r.inter_token_latency);
  // vLLM's older name of the inter-token latency, which autoscalers' queries still use.
  if (vllm)
    page.histogram("time_per_output_token_seconds",
                   "Histogram of time per output token in seconds (the inter-token latency).",
                   r.inter_token_latency);
  page.histogram("request_time_per_output_token_seconds",
                 "Histogram of time_per_output_token_seconds per request.",
                 r.time_per_output_token);
  page.histogram("e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                 r.e2e_latency);
  page.histogram("request_queue_time_seconds",
                 "Histogram of time spent in WAITING phase for request.", r.queue_time);
  page.histogram("request_prompt_tokens", "Number of prefill tokens processed.", r.prompt_tokens);
  page.histogram("request_generation_tokens", "Number of generation tokens processed.",
                 r.generation_tokens);
}

void ServerMetrics::render_tern_only(MetricsPage& page, const EngineStats& s, const Recorded& r) {
  page.gauge("kv_cache_capacity_tokens", "Tokens the KV cache holds when full.",
             static_cast<double>(s.num_blocks) * s.block_size);
  page.counter("requests_rejected_queue_full_total",
               "Requests refused with 503 because --max-waiting-requests requests were waiting.",
               static_cast<double>(r.rejected_queue_full));
  if (!s.kv_transfer) return;
  page.gauge("kv_transfer_leases_held", "Prefilled prompts whose blocks wait for a pull.",
             static_cast<double>(s.kv.leases.held));
  page.counter("kv_transfer_leases_expired_total",
               "Leases that expired before a pull (their blocks were freed).",
               static_cast<double>(s.kv.leases.expired));
  page.counter("kv_transfer_leases_granted_total", "Leases granted to prefilled prompts.",
               static_cast<double>(s.kv.leases.granted));
  page.counter("kv_transfer_sent_bytes_total", "KV bytes sent to decode instances.",
               static_cast<double>(s.kv.bytes_sent));
  page.counter("kv_transfer_sent_blocks_total", "KV blocks sent to decode instances.",
               static_cast<double>(s.kv.blocks_sent));
  page.counter("kv_transfer_received_bytes_total", "KV bytes pulled from prefill instances.",
               static_cast<double>(s.kv.bytes_received));
  page.counter("kv_transfer_received_blocks_total", "KV blocks pulled from prefill instances.",
               static_cast<double>(s.kv.blocks_received));
  page.counter("kv_transfer_pulls_failed_total", "Pulls of this instance that failed.",
               static_cast<double>(s.kv.pulls_failed));
  page.counter("kv_transfer_pulls_refused_total",
               "Pulls refused by this instance (unknown, expired or used lease; bad block).",
               static_cast<double>(s.kv.pulls_refused));
  page.counter("kv_transfer_bad_frames_total", "Malformed frames on the transfer port.",
               static_cast<double>(s.kv.bad_frames));
  page.histogram("kv_transfer_seconds", "Histogram of the pulls of prompts' KV in seconds.",
                 r.kv_transfer_seconds);
}

std::string prometheus_number(double v) { return number(v); }

std::string prometheus_label_value(const std::string& s) { return label_value(s); }

void prometheus_header(std::string& out, const std::string& name, const char* type,
                       const char* help) {
  header(out, name, type, help);
}

}  // namespace tern::server
