// vLLM's serving metrics (vllm/benchmarks/serve.py: calculate_metrics) over request records.
#include "tern/bench/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "tern/core/error.h"

namespace tern::bench {

GoodputSlos parse_goodput(std::span<const std::string> pairs) {
  GoodputSlos slos;
  for (const std::string& pair : pairs) {
    const size_t colon = pair.find(':');
    if (colon == std::string::npos || pair.find(':', colon + 1) != std::string::npos)
      throw Error("--goodput '" + pair +
                  "': expected KEY:VALUE with KEY ttft, tpot or e2el and VALUE in milliseconds");
    const std::string key = pair.substr(0, colon);
    const std::string value = pair.substr(colon + 1);
    if (key != "ttft" && key != "tpot" && key != "e2el")
      throw Error("--goodput '" + pair + "': unknown metric '" + key +
                  "' (the service level objective must be one of ttft, tpot, e2el)");
    double ms = 0;
    size_t used = 0;
    try {
      ms = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size() || !std::isfinite(ms))
      throw Error("--goodput '" + pair + "': '" + value + "' is not a number of milliseconds");
    if (ms < 0) throw Error("--goodput '" + pair + "': the objective must be non-negative");
    slos.ms[key] = ms;
  }
  return slos;
}

double percentile(std::span<const double> values, double p) {
  if (values.empty()) return 0;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const double lower = std::floor(rank);
  const size_t lo = static_cast<size_t>(lower);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - lower;
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

double mean(std::span<const double> values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double median(std::span<const double> values) { return percentile(values, 50); }

double population_std(std::span<const double> values) {
  if (values.empty()) return 0;
  const double m = mean(values);
  double sum_sq = 0;
  for (double v : values) sum_sq += (v - m) * (v - m);
  return std::sqrt(sum_sq / static_cast<double>(values.size()));
}

LatencyStats latency_stats(std::span<const double> seconds, std::span<const double> percentiles) {
  LatencyStats s;
  s.mean_ms = mean(seconds) * 1000;
  s.median_ms = median(seconds) * 1000;
  s.std_ms = population_std(seconds) * 1000;
  for (double p : percentiles) s.percentiles_ms.emplace_back(p, percentile(seconds, p) * 1000);
  return s;
}

namespace {

// The busiest one-second bucket of token arrivals (first token at start + ttft, each later one
// an ITL after the previous), counted from the earliest successful start.
double peak_output_tokens_per_s(std::span<const RequestRecord> records) {
  double min_start = 0, max_end = 0;
  bool any = false;
  for (const RequestRecord& r : records) {
    if (!r.success) continue;
    min_start = any ? std::min(min_start, r.start_time) : r.start_time;
    max_end = any ? std::max(max_end, r.start_time + r.latency) : r.start_time + r.latency;
    any = true;
  }
  if (!any) return 0;
  const int64_t buckets = static_cast<int64_t>(std::ceil(max_end - min_start)) + 1;
  std::vector<double> tokens(static_cast<size_t>(buckets), 0.0);
  auto add = [&](double t) {
    const int64_t b = static_cast<int64_t>(t - min_start);  // truncation, as Python's int()
    if (b >= 0 && b < buckets) tokens[static_cast<size_t>(b)] += 1;
  };
  for (const RequestRecord& r : records) {
    if (!r.success) continue;
    double t = r.start_time + r.ttft;
    add(t);
    for (double gap : r.itl) add(t += gap);
  }
  return *std::max_element(tokens.begin(), tokens.end());
}

// Peak number of successful requests in flight at once, over half-open [start, end): an end
// and a start at the same instant do not overlap.
int64_t peak_concurrency(std::span<const RequestRecord> records) {
  std::vector<std::pair<double, int>> events;
  for (const RequestRecord& r : records) {
    if (!r.success) continue;
    events.emplace_back(r.start_time, +1);
    events.emplace_back(r.start_time + r.latency, -1);
  }
  std::sort(events.begin(), events.end());  // at equal times -1 sorts before +1
  int64_t current = 0, peak = 0;
  for (const auto& [time, delta] : events) {
    current += delta;
    peak = std::max(peak, current);
  }
  return peak;
}

}  // namespace

BenchmarkMetrics compute_metrics_with_lens(std::span<const RequestRecord> records,
                                           std::span<const int64_t> output_lens, double duration_s,
                                           const GoodputSlos& slos,
                                           std::span<const double> percentiles) {
  if (output_lens.size() != records.size())
    throw Error("compute_metrics: one output length per request record is needed");
  if (!(duration_s > 0)) throw Error("compute_metrics: the benchmark duration must be positive");
  BenchmarkMetrics m;
  m.output_lens.assign(output_lens.begin(), output_lens.end());
  std::vector<double> all_tpots;  // one per success, 0 where output <= 1 (for goodput)
  for (size_t i = 0; i < records.size(); ++i) {
    const RequestRecord& r = records[i];
    if (!r.success) {
      m.output_lens[i] = 0;
      ++m.failed;
      continue;
    }
    const int64_t out = output_lens[i];
    m.total_input += r.prompt_len;
    m.total_output += out;
    double tpot = 0;
    if (out > 1) {
      tpot = (r.latency - r.ttft) / static_cast<double>(out - 1);
      m.tpots.push_back(tpot);
    }
    all_tpots.push_back(tpot);
    m.itls.insert(m.itls.end(), r.itl.begin(), r.itl.end());
    m.ttfts.push_back(r.ttft);
    m.e2els.push_back(r.latency);
    ++m.completed;
  }

  int64_t good = 0;
  if (!slos.empty()) {
    auto slo_s = [&](const char* key) {
      auto it = slos.ms.find(key);
      return it == slos.ms.end() ? -1.0 : it->second / 1000.0;
    };
    const double ttft_slo = slo_s("ttft"), tpot_slo = slo_s("tpot"), e2el_slo = slo_s("e2el");
    for (size_t i = 0; i < m.ttfts.size(); ++i) {
      // A request is good when it meets every given objective (value <= objective).
      const bool ok = (ttft_slo < 0 || m.ttfts[i] <= ttft_slo) &&
                      (tpot_slo < 0 || all_tpots[i] <= tpot_slo) &&
                      (e2el_slo < 0 || m.e2els[i] <= e2el_slo);
      if (ok) ++good;
    }
  }

  m.request_throughput = static_cast<double>(m.completed) / duration_s;
  m.request_goodput = static_cast<double>(good) / duration_s;
  m.output_throughput = static_cast<double>(m.total_output) / duration_s;
  m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / duration_s;
  m.ttft = latency_stats(m.ttfts, percentiles);
  m.tpot = latency_stats(m.tpots, percentiles);
  m.itl = latency_stats(m.itls, percentiles);
  m.e2el = latency_stats(m.e2els, percentiles);
  m.max_output_tokens_per_s = peak_output_tokens_per_s(records);
  m.max_concurrent_requests = peak_concurrency(records);
  return m;
}

}  // namespace tern::bench
