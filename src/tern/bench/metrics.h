// The serving benchmark's figures, defined as vLLM's `vllm bench serve` defines them
// (vllm/benchmarks/serve.py, calculate_metrics), so a tern run and a vLLM run compare.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace tern::bench {

// What the client measured for one request. Times are seconds; start_time counts from the
// start of the benchmark.
struct RequestRecord {
  bool success = false;
  std::string error;          // why it failed; empty on success
  int64_t prompt_len = 0;     // the dataset's count, replaced by usage.prompt_tokens if given
  int64_t output_tokens = 0;  // usage.completion_tokens; 0 = the server gave none
  double ttft = 0;            // request sent → first chunk with a choice
  std::vector<double> itl;    // gap before each later chunk with a choice
  double latency = 0;         // request sent → last chunk with a choice (E2EL)
  double start_time = 0;      // when the request was sent
  double queue_time = 0;      // arrival → sent: time spent waiting for --max-concurrency
  std::string generated_text;
};

// Service-level objectives in milliseconds for goodput; absent = not part of the test.
struct GoodputSlos {
  std::map<std::string, double> ms;  // keys: "ttft", "tpot", "e2el"
  bool empty() const { return ms.empty(); }
};

// Parses vLLM's --goodput "KEY:VALUE" pairs (milliseconds). tern::Error for an unknown key, a
// malformed pair or a negative value.
GoodputSlos parse_goodput(std::span<const std::string> pairs);

// numpy.percentile(values, p) with numpy's default "linear" method: the value at rank
// p/100·(n−1) of the sorted values, interpolated between its neighbours. 0 for no values,
// as vLLM's `np.percentile(xs or 0, p)` gives.
double percentile(std::span<const double> values, double p);
double mean(std::span<const double> values);
double median(std::span<const double> values);
double population_std(std::span<const double> values);  // numpy.std (ddof = 0)

// Mean, median, std and the chosen percentiles of one latency, in milliseconds.
struct LatencyStats {
  double mean_ms = 0, median_ms = 0, std_ms = 0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p, value)
};
LatencyStats latency_stats(std::span<const double> seconds, std::span<const double> percentiles);

struct BenchmarkMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t total_input = 0;
  int64_t total_output = 0;
  double request_throughput = 0;      // completed / duration
  double request_goodput = 0;         // requests meeting every SLO / duration
  double output_throughput = 0;       // output tokens / duration
  double total_token_throughput = 0;  // (input + output tokens) / duration
  LatencyStats ttft, tpot, itl, e2el;
  double max_output_tokens_per_s = 0;   // the busiest one-second bucket of token arrivals
  int64_t max_concurrent_requests = 0;  // peak overlap of [start, start + latency)
  // Per request: its output tokens (0 for failures), as vLLM saves "output_lens".
  std::vector<int64_t> output_lens;
  // The samples behind the statistics, in seconds (for plots).
  std::vector<double> ttfts, tpots, itls, e2els;
};

// `count_tokens` turns generated text into a token count for a request whose server gave no
// usage.completion_tokens (vLLM tokenizes without special tokens).
template <typename CountTokens>
BenchmarkMetrics compute_metrics(std::span<const RequestRecord> records, double duration_s,
                                 const GoodputSlos& slos, std::span<const double> percentiles,
                                 CountTokens&& count_tokens);

// The same with the output counts already resolved (output_lens[i] for record i).
BenchmarkMetrics compute_metrics_with_lens(std::span<const RequestRecord> records,
                                           std::span<const int64_t> output_lens, double duration_s,
                                           const GoodputSlos& slos,
                                           std::span<const double> percentiles);

template <typename CountTokens>
BenchmarkMetrics compute_metrics(std::span<const RequestRecord> records, double duration_s,
                                 const GoodputSlos& slos, std::span<const double> percentiles,
                                 CountTokens&& count_tokens) {
  std::vector<int64_t> lens(records.size(), 0);
  for (size_t i = 0; i < records.size(); ++i) {
    if (!records[i].success) continue;
    lens[i] = records[i].output_tokens > 0 ? records[i].output_tokens
                                           : count_tokens(records[i].generated_text);
  }
  return compute_metrics_with_lens(records, lens, duration_s, slos, percentiles);
}

}  // namespace tern::bench
