// The interference figures: gaps placed in time, the worst one found, and the timeline's marks.
#include "tern/bench/interference.h"

#include <gtest/gtest.h>

namespace tern::bench {
namespace {

RequestRecord stream(double start, double ttft, std::vector<double> itl, bool success = true) {
  RequestRecord r;
  r.success = success;
  r.start_time = start;
  r.ttft = ttft;
  r.itl = std::move(itl);
  return r;
}

TEST(BenchInterference, GapsInTimeAndTheWorstOne) {
  const std::vector<RequestRecord> streams = {
      stream(0.0, 0.1, {0.05, 0.05, 2.0, 0.05}),  // a 2 s stall ending at 2.2 s
      stream(0.5, 0.1, {0.05, 0.5}),
      stream(0.2, 0.1, {9.0}, /*success=*/false),  // failures do not count
  };
  const std::vector<TimedGap> gaps = timed_gaps(streams);
  ASSERT_EQ(gaps.size(), 6u);
  for (size_t i = 1; i < gaps.size(); ++i) EXPECT_LE(gaps[i - 1].end, gaps[i].end);
  const TimedGap worst = worst_gap(streams);
  EXPECT_DOUBLE_EQ(worst.seconds, 2.0);
  EXPECT_NEAR(worst.end, 2.2, 1e-12);
  EXPECT_EQ(worst_gap({}).seconds, 0.0);

  const std::vector<RequestRecord> long_requests = {stream(0.15, 1.9, {}),
                                                    stream(3.0, 0.0, {}, false)};
  const std::vector<double> percentiles = {99};
  const auto j = interference_json(streams, long_requests, percentiles);
  EXPECT_DOUBLE_EQ(j["max_itl_ms"].get<double>(), 2000.0);
  EXPECT_EQ(j["long_completed"], 1);
  EXPECT_EQ(j["long_failed"], 1);
  EXPECT_DOUBLE_EQ(j["max_long_ttft_ms"].get<double>(), 1900.0);
  EXPECT_TRUE(j.contains("p99_long_ttft_ms"));
  const std::string section = interference_section(streams, long_requests, percentiles);
  EXPECT_NE(section.find("Max ITL (ms):                            2000.00"), std::string::npos)
      << section;
  EXPECT_NE(section.find("Long requests failed:                    1"), std::string::npos)
      << section;

  const std::string svg = itl_timeline_svg(streams, long_requests, "t <&>");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("t &lt;&amp;&gt;"), std::string::npos);
  size_t dots = 0, lines = 0, bands = 0;
  for (size_t at = 0; (at = svg.find("class=\"gap\"", at)) != std::string::npos; ++at) ++dots;
  for (size_t at = 0; (at = svg.find("class=\"long-arrival\"", at)) != std::string::npos; ++at)
    ++lines;
  for (size_t at = 0; (at = svg.find("class=\"long-prefill\"", at)) != std::string::npos; ++at)
    ++bands;
  EXPECT_EQ(dots, 6u);
  EXPECT_EQ(lines, 2u);
  EXPECT_EQ(bands, 1u);  // only the one that answered has a prefill to shade
  EXPECT_NE(svg.find("max ITL 2000.0 ms at 2.20 s"), std::string::npos);
}

}  // namespace
}  // namespace tern::bench
