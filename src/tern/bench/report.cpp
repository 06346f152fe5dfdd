// vLLM's summary table and result JSON (vllm/benchmarks/serve.py: benchmark, main_async).
#include "tern/bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tern::bench {

// Python's "{:<40} {:<10.2f}" and "{:<40} {:<10}".
void summary_row(std::string& out, const std::string& label, double value) {
  char line[128];
  std::snprintf(line, sizeof line, "%-40s %-10.2f\n", label.c_str(), value);
  out += line;
}
void summary_row(std::string& out, const std::string& label, int64_t value) {
  char line[128];
  std::snprintf(line, sizeof line, "%-40s %-10lld\n", label.c_str(), static_cast<long long>(value));
  out += line;
}

// Python's "{s:{c}^{n}}": centred, the odd padding character on the right.
std::string summary_rule(const std::string& s, char fill, size_t width) {
  if (s.size() >= width) return s + "\n";
  const size_t pad = width - s.size();
  return std::string(pad / 2, fill) + s + std::string(pad - pad / 2, fill) + "\n";
}

std::string python_float(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const double magnitude = std::fabs(v);
  if (v == 0 || (magnitude >= 1e-4 && magnitude < 1e16)) {
    for (int decimals = 1; decimals <= 20; ++decimals) {
      std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
      if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

namespace {

const LatencyStats& stats_of(const BenchmarkMetrics& m, const std::string& name) {
  if (name == "ttft") return m.ttft;
  if (name == "tpot") return m.tpot;
  if (name == "itl") return m.itl;
  return m.e2el;
}

struct MetricNames {
  const char* key;
  const char* label;
  const char* header;
};
constexpr MetricNames kMetrics[] = {
    {"ttft", "TTFT", "Time to First Token"},
    {"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
    {"itl", "ITL", "Inter-token Latency"},
    {"e2el", "E2EL", "End-to-end Latency"},
};

bool selected(const ReportConfig& c, const std::string& key) {
  for (const std::string& k : c.percentile_metrics)
    if (k == key) return true;
  return false;
}

}  // namespace

std::string percentile_word(double p) {
  if (std::floor(p) == p) return std::to_string(static_cast<int64_t>(p));
  return python_float(p);
}

std::string summary_table(const BenchmarkMetrics& m, const ReportConfig& c, double duration_s) {
  std::string out = summary_rule(" Serving Benchmark Result ", '=');
  summary_row(out, "Successful requests:", m.completed);
  summary_row(out, "Failed requests:", m.failed);
  if (c.max_concurrency) summary_row(out, "Maximum request concurrency:", *c.max_concurrency);
  if (!std::isinf(c.request_rate))
    summary_row(out, "Request rate configured (RPS):", c.request_rate);
  summary_row(out, "Benchmark duration (s):", duration_s);
  summary_row(out, "Total input tokens:", m.total_input);
  summary_row(out, "Total generated tokens:", m.total_output);
  summary_row(out, "Request throughput (req/s):", m.request_throughput);
  if (c.goodput) summary_row(out, "Request goodput (req/s):", m.request_goodput);
  summary_row(out, "Output token throughput (tok/s):", m.output_throughput);
  summary_row(out, "Peak output token throughput (tok/s):", m.max_output_tokens_per_s);
  summary_row(out, "Peak concurrent requests:", static_cast<double>(m.max_concurrent_requests));
  summary_row(out, "Total token throughput (tok/s):", m.total_token_throughput);
  for (const MetricNames& names : kMetrics) {
    if (!selected(c, names.key)) continue;
    const LatencyStats& s = stats_of(m, names.key);
    out += summary_rule(names.header, '-');
    summary_row(out, std::string("Mean ") + names.label + " (ms):", s.mean_ms);
    summary_row(out, std::string("Median ") + names.label + " (ms):", s.median_ms);
    for (const auto& [p, value] : s.percentiles_ms)
      summary_row(out,
                  std::string("P")
                      .append(percentile_word(p))
                      .append(" ")
                      .append(names.label)
                      .append(" (ms):"),
                  value);
  }
  out += std::string(50, '=') + "\n";
  return out;
}

std::string metric_notes(const BenchmarkMetrics& m, double duration_s) {
  std::string out;
  char line[512];
  if (m.max_output_tokens_per_s < m.output_throughput) {
    std::snprintf(line, sizeof line,
                  "note: the peak output token throughput (%.2f) is below the mean (%.2f): the "
                  "peak is the most tokens within one of the whole seconds counted from the "
                  "first request's start (vLLM's definition), and in a %.2f s run those seconds "
                  "need not hold a full second of output\n",
                  m.max_output_tokens_per_s, m.output_throughput, duration_s);
    out += line;
  }
  const auto zeros = std::count(m.itls.begin(), m.itls.end(), 0.0);
  if (zeros > 0) {
    std::snprintf(line, sizeof line,
                  "note: %lld of %zu inter-token latencies are 0 ms: chunks that reached the "
                  "client together, in one read (the server sent them at once or the client "
                  "was busy)\n",
                  static_cast<long long>(zeros), m.itls.size());
    out += line;
  }
  return out;
}

std::string failure_lines(const std::vector<RequestRecord>& records) {
  std::string out;
  int shown = 0;
  for (const RequestRecord& r : records) {
    if (r.success) continue;
    if (shown == 0) out += "Failed requests during benchmark run detected (capping to 10):\n";
    out += "Error " + std::to_string(shown) + ": " + r.error + "\n";
    if (++shown == 10) break;
  }
  return out;
}

nlohmann::ordered_json result_json(const BenchmarkMetrics& m, const ReportConfig& c,
                                   const std::vector<RequestRecord>& records, double duration_s,
                                   const std::string& date) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["date"] = date;
  j["endpoint_type"] = c.backend;
  j["backend"] = c.backend;
  j["label"] = nullptr;
  j["model_id"] = c.model_id;
  j["tokenizer_id"] = c.tokenizer_id;
  j["num_prompts"] = c.num_prompts;
  if (std::isinf(c.request_rate))
    j["request_rate"] = "inf";
  else
    j["request_rate"] = c.request_rate;
  j["burstiness"] = c.burstiness;
  j["max_concurrency"] =
      c.max_concurrency ? ordered_json(*c.max_concurrency) : ordered_json(nullptr);
  j["duration"] = duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input;
  j["total_output_tokens"] = m.total_output;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = c.goodput ? ordered_json(m.request_goodput) : ordered_json(nullptr);
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  ordered_json input_lens = ordered_json::array(), ttfts = ordered_json::array(),
               itls = ordered_json::array(), latencies = ordered_json::array(),
               start_times = ordered_json::array(), queue_times = ordered_json::array(),
               texts = ordered_json::array(), errors = ordered_json::array();
  for (const RequestRecord& r : records) {
    input_lens.push_back(r.prompt_len);
    ttfts.push_back(r.ttft);
    itls.push_back(r.itl);
    latencies.push_back(r.latency);
    start_times.push_back(r.start_time);
    queue_times.push_back(r.queue_time);
    texts.push_back(r.generated_text);
    errors.push_back(r.error);
  }
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = m.output_lens;
  j["ttfts"] = std::move(ttfts);
  j["itls"] = std::move(itls);
  j["latencies"] = std::move(latencies);
  j["start_times"] = std::move(start_times);
  j["queue_times"] = std::move(queue_times);
  j["generated_texts"] = std::move(texts);
  j["errors"] = std::move(errors);
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  for (const MetricNames& names : kMetrics) {
    if (!selected(c, names.key)) continue;
    const LatencyStats& s = stats_of(m, names.key);
    const std::string key = names.key;
    j["mean_" + key + "_ms"] = s.mean_ms;
    j["median_" + key + "_ms"] = s.median_ms;
    j["std_" + key + "_ms"] = s.std_ms;
    for (const auto& [p, value] : s.percentiles_ms)
      j[std::string("p").append(percentile_word(p)).append("_").append(key).append("_ms")] = value;
  }
  return j;
}

std::string default_result_filename(const ReportConfig& c, const std::string& date) {
  std::string base_model = c.model_id;
  if (size_t slash = base_model.rfind('/'); slash != std::string::npos)
    base_model = base_model.substr(slash + 1);
  std::string name = c.backend + "-" + python_float(c.request_rate) + "qps";
  if (c.max_concurrency) name += "-concurrency" + std::to_string(*c.max_concurrency);
  return name + "-" + base_model + "-" + date + ".json";
}

}  // namespace tern::bench
