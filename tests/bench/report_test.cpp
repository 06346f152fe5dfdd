// The summary table, result JSON names and plot axes in vLLM's (Python's) formats.
#include "tern/bench/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tern/bench/svg_plot.h"

namespace tern::bench {
namespace {

ReportConfig config() {
  ReportConfig c;
  c.backend = "openai";
  c.model_id = "Qwen/Qwen3-0.6B";
  c.request_rate = 40;
  c.max_concurrency = 8;
  c.percentile_metrics = {"ttft", "e2el"};
  c.percentiles = {99.9, 50};
  return c;
}

TEST(BenchReport, PercentileWordsAndFileNames) {
  EXPECT_EQ(percentile_word(99), "99");
  EXPECT_EQ(percentile_word(99.9), "99.9");
  EXPECT_EQ(percentile_word(50), "50");
  EXPECT_EQ(python_float(40), "40.0");
  EXPECT_EQ(python_float(0.1), "0.1");
  EXPECT_EQ(python_float(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(python_float(INFINITY), "inf");
  EXPECT_EQ(python_float(1e20), "1e+20");
  ReportConfig c = config();
  EXPECT_EQ(default_result_filename(c, "20260101-120000"),
            "openai-40.0qps-concurrency8-Qwen3-0.6B-20260101-120000.json");
  c.request_rate = INFINITY;
  c.max_concurrency.reset();
  c.request_rate = 0.5;
  EXPECT_EQ(default_result_filename(c, "D"), "openai-0.5qps-Qwen3-0.6B-D.json");
  c.request_rate = INFINITY;
  EXPECT_EQ(default_result_filename(c, "D"), "openai-infqps-Qwen3-0.6B-D.json");
}

TEST(BenchReport, TableRowsAreLeftAlignedColumnsOf40And10) {
  BenchmarkMetrics m;
  m.completed = 3;
  m.ttft.mean_ms = 12.345;
  m.ttft.percentiles_ms = {{99.9, 20.0}, {50, 10.0}};
  const std::string table = summary_table(m, config(), 1.5);
  EXPECT_EQ(table.substr(0, 51), "============ Serving Benchmark Result ============\n");
  EXPECT_NE(table.find("\nSuccessful requests:                     3         \n"),
            std::string::npos);
  EXPECT_NE(table.find("\nMaximum request concurrency:             8         \n"),
            std::string::npos);
  EXPECT_NE(table.find("\nRequest rate configured (RPS):           40.00     \n"),
            std::string::npos);
  EXPECT_NE(table.find("\nBenchmark duration (s):                  1.50      \n"),
            std::string::npos);
  // Python centres with the odd fill character on the right.
  EXPECT_NE(table.find("\n---------------Time to First Token----------------\n"),
            std::string::npos);
  EXPECT_NE(table.find("\nMean TTFT (ms):                          12.35     \n"),
            std::string::npos);
  EXPECT_NE(table.find("\nP99.9 TTFT (ms):                         20.00     \n"),
            std::string::npos);
  EXPECT_EQ(table.find("TPOT"), std::string::npos) << "not selected";
  EXPECT_EQ(table.find("goodput"), std::string::npos) << "no SLOs given";
}

TEST(BenchReport, ResultJsonKeys) {
  BenchmarkMetrics m;
  m.completed = 1;
  m.failed = 1;
  m.output_lens = {4, 0};
  m.ttft.percentiles_ms = m.e2el.percentiles_ms = {{99.9, 20.0}, {50, 10.0}};
  std::vector<RequestRecord> records(2);
  records[0].success = true;
  records[0].itl = {0.1, 0.2};
  records[1].error = "HTTP 500";
  const auto j = result_json(m, config(), records, 2.0, "20260101-120000");
  EXPECT_EQ(j["date"], "20260101-120000");
  EXPECT_EQ(j["request_rate"], 40.0);
  EXPECT_TRUE(j["request_goodput"].is_null());
  EXPECT_EQ(j["itls"][0], (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(j["errors"][1], "HTTP 500");
  EXPECT_EQ(j["output_lens"][0], 4);
  for (const char* key : {"mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99.9_ttft_ms",
                          "p50_ttft_ms", "mean_e2el_ms", "p99.9_e2el_ms"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_FALSE(j.contains("mean_tpot_ms"));
}

TEST(BenchReport, NotesExplainAShortRunsPeakAndZeroGaps) {
  BenchmarkMetrics m;
  m.output_throughput = 16;
  m.max_output_tokens_per_s = 8;
  m.itls = {0, 0.25, 0, 0.5};
  const std::string notes = metric_notes(m, 0.5);
  EXPECT_NE(notes.find("peak output token throughput (8.00) is below the mean (16.00)"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("in a 0.50 s run"), std::string::npos) << notes;
  EXPECT_NE(notes.find("2 of 4 inter-token latencies are 0 ms"), std::string::npos) << notes;
  // A peak at or above the mean and no zero gap: nothing to explain.
  m.max_output_tokens_per_s = 16;
  m.itls = {0.25, 0.5};
  EXPECT_EQ(metric_notes(m, 0.5), "");
}

TEST(BenchPlot, AxisTicksAreRoundNumbersCoveringTheMaximum) {
  EXPECT_EQ(axis_ticks(58.64), (std::vector<double>{0, 20, 40, 60}));
  EXPECT_EQ(axis_ticks(10), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(axis_ticks(0.7).back(), 0.8);
  EXPECT_EQ(axis_ticks(0), (std::vector<double>{0, 1}));
  const std::string svg = latency_cdf_svg({{"TTFT", {0.01, 0.02}}, {"ITL", {}}}, "a < b & c");
  EXPECT_NE(svg.find("a &lt; b &amp; c"), std::string::npos);
  EXPECT_NE(svg.find("TTFT CDF (n = 2)"), std::string::npos);
  EXPECT_NE(svg.find("no samples"), std::string::npos);
}

}  // namespace
}  // namespace tern::bench
