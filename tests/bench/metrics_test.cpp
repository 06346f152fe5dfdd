// vLLM's serving metrics on hand-made request records, every figure worked out by hand.
#include "tern/bench/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tern/core/error.h"

namespace tern::bench {
namespace {

TEST(BenchPercentile, MatchesNumpyLinearInterpolation) {
  const std::vector<double> v = {4, 1, 3, 2};  // sorted 1 2 3 4, ranks 0..3
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);   // rank 1.5
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);   // rank 2.7: 3 + 0.7·(4 − 3)
  EXPECT_DOUBLE_EQ(percentile(v, 99), 3.97);  // rank 2.97
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{}, 99), 0);  // vLLM: np.percentile(0, p)
  EXPECT_DOUBLE_EQ(median(std::vector<double>{3, 1, 2}), 2);
}

TEST(BenchPercentile, StdIsThePopulationStd) {
  const std::vector<double> v = {1, 2, 3, 4};  // mean 2.5, variance (2.25+0.25+0.25+2.25)/4
  EXPECT_DOUBLE_EQ(mean(v), 2.5);
  EXPECT_DOUBLE_EQ(population_std(v), std::sqrt(1.25));
  EXPECT_DOUBLE_EQ(population_std(std::vector<double>{}), 0);
}

// Three successes and one failure over 2 s:
//   r0: sent 0.0, ttft 0.1, 5 tokens (usage), ITLs 0.1 ×4, e2el 0.5 → tpot 0.4/4 = 0.1
//   r1: sent 0.5, ttft 0.2, no usage, text counted as 3 tokens, ITLs 0.5 ×2, e2el 1.2
//       → tpot 1.0/2 = 0.5
//   r2: sent 1.0, ttft 0.3, 1 token, e2el 0.3 → no TPOT (counts as 0 for goodput)
//   r3: failed
std::vector<RequestRecord> hand_made_records() {
  std::vector<RequestRecord> r(4);
  r[0] = {true, "", 10, 5, 0.1, {0.1, 0.1, 0.1, 0.1}, 0.5, 0.0, 0, "abcde"};
  r[1] = {true, "", 20, 0, 0.2, {0.5, 0.5}, 1.2, 0.5, 0, "xyz"};
  r[2] = {true, "", 5, 1, 0.3, {}, 0.3, 1.0, 0, "q"};
  r[3] = {false, "HTTP 500", 7, 0, 0, {}, 0, 1.5, 0, ""};
  return r;
}

BenchmarkMetrics hand_made_metrics(const GoodputSlos& slos = {}) {
  const std::vector<double> percentiles = {90, 99};
  return compute_metrics(hand_made_records(), 2.0, slos, percentiles,
                         [](const std::string& text) { return static_cast<int64_t>(text.size()); });
}

TEST(BenchMetrics, CountsAndThroughputs) {
  const BenchmarkMetrics m = hand_made_metrics();
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 35);  // failures do not count
  EXPECT_EQ(m.total_output, 9);  // 5 + 3 (tokenized text) + 1
  EXPECT_EQ(m.output_lens, (std::vector<int64_t>{5, 3, 1, 0}));
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 4.5);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 22);
  EXPECT_DOUBLE_EQ(m.request_goodput, 0);  // no SLOs given
}

TEST(BenchMetrics, LatencyStatistics) {
  const BenchmarkMetrics m = hand_made_metrics();
  // TPOT only for requests with more than one token: {0.1, 0.5}.
  ASSERT_EQ(m.tpots.size(), 2u);
  EXPECT_NEAR(m.tpot.mean_ms, 300, 1e-9);
  EXPECT_NEAR(m.tpot.median_ms, 300, 1e-9);
  EXPECT_NEAR(m.tpot.std_ms, 200, 1e-9);
  // TTFT {0.1, 0.2, 0.3}: p90 at rank 1.8 → 0.28, p99 at rank 1.98 → 0.298.
  EXPECT_NEAR(m.ttft.mean_ms, 200, 1e-9);
  EXPECT_NEAR(m.ttft.median_ms, 200, 1e-9);
  ASSERT_EQ(m.ttft.percentiles_ms.size(), 2u);
  EXPECT_EQ(m.ttft.percentiles_ms[0].first, 90);
  EXPECT_NEAR(m.ttft.percentiles_ms[0].second, 280, 1e-9);
  EXPECT_NEAR(m.ttft.percentiles_ms[1].second, 298, 1e-9);
  // ITL pools every gap: {0.1 ×4, 0.5 ×2}, mean 1.4/6, median (rank 2.5) 0.1.
  EXPECT_EQ(m.itls.size(), 6u);
  EXPECT_NEAR(m.itl.mean_ms, 1400.0 / 6, 1e-9);
  EXPECT_NEAR(m.itl.median_ms, 100, 1e-9);
  // E2EL {0.5, 1.2, 0.3}.
  EXPECT_NEAR(m.e2el.median_ms, 500, 1e-9);
  EXPECT_NEAR(m.e2el.mean_ms, 2000.0 / 3, 1e-9);
}

TEST(BenchMetrics, PeakConcurrencyAndTokensPerSecond) {
  const BenchmarkMetrics m = hand_made_metrics();
  // [0, 0.5) and [0.5, 1.7) touch but do not overlap; [1.0, 1.3) overlaps r1.
  EXPECT_EQ(m.max_concurrent_requests, 2);
  // Token times: r0 0.1 .. 0.5 (5 in second 0), r1 0.7 (second 0), 1.2, 1.7, r2 1.3.
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 6);
}

// Hand-made timelines for the two figures that look wrong in short runs and are vLLM's
// definitions (vllm/benchmarks/serve.py, calculate_metrics): the peak output token throughput
// counts token arrivals in whole one-second buckets from the earliest successful start; ITL
// pools every gap between successive token chunks of every request, zeros included. Times are
// multiples of 1/8 s, exact in binary, so bucket edges are exact.
RequestRecord timeline(double start, double ttft, std::vector<double> itl, int64_t tokens) {
  RequestRecord r;
  r.success = true;
  r.start_time = start;
  r.ttft = ttft;
  r.itl = std::move(itl);
  r.latency = ttft;
  for (double gap : r.itl) r.latency += gap;
  r.output_tokens = tokens;
  r.prompt_len = 8;
  return r;
}

BenchmarkMetrics metrics_of(const std::vector<RequestRecord>& records, double duration_s) {
  const std::vector<double> percentiles = {90};
  return compute_metrics(records, duration_s, {}, percentiles,
                         [](const std::string&) -> int64_t { return 0; });
}

TEST(BenchMetrics, PeakOfAShortRunIsBelowTheMean) {
  // A 0.5 s run: r0 sends at 0, tokens at 0.125, 0.25, 0.375, 0.5; r1 sends at 0.125, tokens
  // at 0.25, 0.375, 0.5, 0.625. All 8 fall in second 0: the peak is 8 tokens in a second, the
  // mean 8 / 0.5 = 16 tokens/s.
  const std::vector<RequestRecord> r = {timeline(0, 0.125, {0.125, 0.125, 0.125}, 4),
                                        timeline(0.125, 0.125, {0.125, 0.125, 0.125}, 4)};
  const BenchmarkMetrics m = metrics_of(r, 0.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 16);
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 8);
  EXPECT_EQ(m.max_concurrent_requests, 2);  // [0, 0.5) and [0.125, 0.625)
}

TEST(BenchMetrics, PeakBucketsAreWholeSecondsFromTheFirstSuccessfulStart) {
  // A failure sent at 0 does not move the buckets; the first success is sent at 0.5, so
  // second k holds arrivals in [0.5 + k, 1.5 + k):
  //   r0: sent 0.5, tokens at 0.75, 1.25 (second 0), 1.5 (on the edge: second 1), 2.0
  //   r1: sent 1.0, tokens at 1.25 (second 0), 1.5, 1.75, 2.0, 2.25 (second 1)
  // Second 0 holds 3 tokens, second 1 holds 6. (Buckets from the failure's 0 would give 5 in
  // [1, 2); an edge token counted in the earlier second would give 5 in second 0.)
  RequestRecord failed;
  failed.error = "HTTP 500";
  const std::vector<RequestRecord> r = {failed, timeline(0.5, 0.25, {0.5, 0.25, 0.5}, 4),
                                        timeline(1.0, 0.25, {0.25, 0.25, 0.25, 0.25}, 5)};
  const BenchmarkMetrics m = metrics_of(r, 2.5);
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 6);
  EXPECT_DOUBLE_EQ(m.output_throughput, 9 / 2.5);
  EXPECT_EQ(m.max_concurrent_requests, 2);  // [0.5, 2.0) and [1.0, 2.25); not the failure
}

TEST(BenchMetrics, ItlPoolsEveryGapZerosIncluded) {
  // Chunks that reach the client in one read are 0 s apart. r0: gaps 0, 0, 0.25 (4 tokens,
  // ttft 0.25, e2el 0.5); r1: gaps 0, 0.5 (3 tokens, ttft 0.25, e2el 0.75).
  // Pooled and sorted: 0, 0, 0, 0.25, 0.5 → median 0, mean 0.75 / 5 = 0.15 s, p90 at rank 3.6:
  // 0.25 + 0.6 · 0.25 = 0.4 s. TPOT is per request, over its whole decode: r0 0.25 / 3,
  // r1 0.5 / 2 = 0.25, so its median is not 0.
  const std::vector<RequestRecord> r = {timeline(0, 0.25, {0, 0, 0.25}, 4),
                                        timeline(0, 0.25, {0, 0.5}, 3)};
  const BenchmarkMetrics m = metrics_of(r, 1.0);
  EXPECT_EQ(m.itls, (std::vector<double>{0, 0, 0.25, 0, 0.5}));
  EXPECT_DOUBLE_EQ(m.itl.median_ms, 0);
  EXPECT_NEAR(m.itl.mean_ms, 150, 1e-9);
  ASSERT_EQ(m.itl.percentiles_ms.size(), 1u);
  EXPECT_NEAR(m.itl.percentiles_ms[0].second, 400, 1e-9);
  EXPECT_NEAR(m.tpot.median_ms, (250.0 / 3 + 250) / 2, 1e-9);
  // Token arrivals: r0 at 0.25 (three) and 0.5, r1 at 0.25 (two) and 0.75: 7 in second 0.
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 7);
}

TEST(BenchMetrics, GoodputCountsRequestsMeetingEverySlo) {
  // ttft <= 250 ms and tpot <= 200 ms: r0 meets both, r1 misses TPOT, r2 misses TTFT.
  std::vector<std::string> pairs = {"ttft:250", "tpot:200"};
  EXPECT_DOUBLE_EQ(hand_made_metrics(parse_goodput(pairs)).request_goodput, 0.5);
  // tpot alone: r2's single token counts as TPOT 0, so r0 and r2 are good.
  pairs = {"tpot:200"};
  EXPECT_DOUBLE_EQ(hand_made_metrics(parse_goodput(pairs)).request_goodput, 1.0);
  // e2el <= 1300 ms: all three successes; the failure never counts.
  pairs = {"e2el:1300"};
  EXPECT_DOUBLE_EQ(hand_made_metrics(parse_goodput(pairs)).request_goodput, 1.5);
}

TEST(BenchMetrics, ParseGoodputRejectsBadPairs) {
  for (const char* bad : {"ttft", "foo:10", "ttft:-1", "ttft:abc", "ttft:1:2", ":5"}) {
    std::vector<std::string> pairs = {bad};
    EXPECT_THROW(parse_goodput(pairs), Error) << bad;
  }
  std::vector<std::string> ok = {"ttft:10.5", "e2el:0"};
  const GoodputSlos slos = parse_goodput(ok);
  EXPECT_DOUBLE_EQ(slos.ms.at("ttft"), 10.5);
  EXPECT_DOUBLE_EQ(slos.ms.at("e2el"), 0);
}

TEST(BenchMetrics, NoSuccessesGiveZeros) {
  std::vector<RequestRecord> r(2);
  r[0].error = r[1].error = "refused";
  const std::vector<double> p = {99};
  const BenchmarkMetrics m =
      compute_metrics(r, 1.0, {}, p, [](const std::string&) { return int64_t{0}; });
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.ttft.mean_ms, 0);
  EXPECT_EQ(m.max_concurrent_requests, 0);
  EXPECT_THROW(compute_metrics(r, 0.0, {}, p, [](const std::string&) { return int64_t{0}; }),
               Error);
}

}  // namespace
}  // namespace tern::bench
