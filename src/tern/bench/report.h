// The serving benchmark's outputs in vLLM's forms: the printed summary table and the
// --save-result JSON (keys as `vllm bench serve` writes them, so existing scripts read both).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tern/bench/metrics.h"

namespace tern::bench {

struct ReportConfig {
  std::string backend;  // "openai" or "openai-chat"
  std::string model_id;
  std::string tokenizer_id;
  int64_t num_prompts = 0;
  double request_rate = 0;  // inf = all at once
  double burstiness = 1;
  std::optional<int64_t> max_concurrency;
  std::vector<std::string> percentile_metrics;  // of ttft, tpot, itl, e2el
  std::vector<double> percentiles;
  bool goodput = false;  // whether SLOs were given
};

// Python's repr of a float: the shortest text that reads back as the same double, in plain
// notation with at least one decimal between 1e-4 and 1e16 ("40.0", "0.5", "inf").
std::string python_float(double v);

// "99" for 99, "99.9" for 99.9: the p-word of a percentile in labels and JSON keys.
std::string percentile_word(double p);

// vLLM's table: 50 columns, "{:<40} {:<10.2f}" rows, one section per selected metric.
// The table's pieces: a row "{:<40} {:<10.2f}" (or {:<10} for a count), and a heading centred
// in 50 characters of `fill` ("{s:{c}^{n}}").
void summary_row(std::string& out, const std::string& label, double value);
void summary_row(std::string& out, const std::string& label, int64_t value);
std::string summary_rule(const std::string& title, char fill, size_t width = 50);

std::string summary_table(const BenchmarkMetrics& m, const ReportConfig& config, double duration_s);

// Notes under the table on two figures that look wrong and are vLLM's definitions (empty when
// neither applies): the peak output token throughput is the most tokens counted in one of the
// whole seconds from the first request's start, so in a short run it can be below the mean; and
// chunks that reach the client together are 0 s apart, so the median ITL can be 0.
std::string metric_notes(const BenchmarkMetrics& m, double duration_s);

// The first (up to 10) failures, one line each, as vLLM prints them before the table.
std::string failure_lines(const std::vector<RequestRecord>& records);

// The --save-result document: the run's settings (date, backend, model_id, ...), the figures
// (duration, completed, ..., mean_ttft_ms, median_ttft_ms, std_ttft_ms, p99_ttft_ms, ...) and
// the per-request lists (input_lens, output_lens, ttfts, itls, latencies, start_times,
// generated_texts, errors).
nlohmann::ordered_json result_json(const BenchmarkMetrics& m, const ReportConfig& config,
                                   const std::vector<RequestRecord>& records, double duration_s,
                                   const std::string& date);

// vLLM's default file name: "{backend}-{rate}qps[-concurrency{N}]-{model basename}-{date}.json".
std::string default_result_filename(const ReportConfig& config, const std::string& date);

}  // namespace tern::bench
