// The Prometheus text of tern serve's and tern router's /metrics: numbers and bucket bounds in
// their shortest round-trip form, so dashboards written for vLLM (le="0.005") select them.
#include "tern/server/server_metrics.h"

#include <gtest/gtest.h>

#include <limits>
#include <regex>
#include <string>

#include "tern/router/router_metrics.h"

namespace tern::server {
namespace {

// Every number of the page (label values that are numbers, and sample values) with 15 or more
// significant digits: what "%.17g" made of 0.005.
std::vector<std::string> long_numbers(const std::string& page) {
  std::vector<std::string> out;
  const std::regex number(R"((?:="|\} |\s)(-?[0-9]+\.?[0-9]*(?:e[-+]?[0-9]+)?)(?="|\n))");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), number);
       it != std::sregex_iterator(); ++it) {
    std::string digits = (*it)[1].str();
    digits = digits.substr(0, digits.find('e'));
    std::erase_if(digits, [](char c) { return c < '0' || c > '9'; });
    digits.erase(0, digits.find_first_not_of('0'));
    if (digits.size() >= 15) out.push_back((*it)[1].str());
  }
  return out;
}

TEST(ServerMetrics, NumbersAreShortestRoundTrip) {
  EXPECT_EQ(prometheus_number(0.005), "0.005");
  EXPECT_EQ(prometheus_number(0.04), "0.04");
  EXPECT_EQ(prometheus_number(0.1 + 0.2), "0.30000000000000004");  // not 0.3: it reads back
  EXPECT_EQ(prometheus_number(2560.0), "2560");
  EXPECT_EQ(prometheus_number(123456789.0), "123456789");
  EXPECT_EQ(prometheus_number(-0.25), "-0.25");
  EXPECT_EQ(prometheus_number(1e20), "1e+20");
  EXPECT_EQ(prometheus_number(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(prometheus_number(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(prometheus_number(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(ServerMetrics, BucketBoundsAreVllmsText) {
  ServerMetrics metrics(2048);
  RequestMetrics m;
  m.arrival_time = 0.0;
  m.first_scheduled_time = 0.01;
  m.first_token_time = 0.03;
  m.finished_time = 0.7;
  m.num_prompt_tokens = 7;
  m.num_generation_tokens = 3;
  metrics.observe_finished(m, "stop");
  metrics.observe_inter_token_latency(0.1 + 0.2);
  EngineStats stats;
  stats.kv_cache_usage = 0.1;
  const std::string page = metrics.render("m", stats);
  // The first token came after 0.03 s: the buckets from 0.04 up count it.
  const std::string ttft = "tern:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"";
  for (const char* le : {"0.001", "0.005", "0.01", "0.02"})
    EXPECT_NE(page.find(ttft + le + "\"} 0\n"), std::string::npos) << le << "\n" << page;
  for (const char* le :
       {"0.04", "0.06", "0.08", "0.1", "0.25", "0.75", "2.5", "7.5", "2560", "+Inf"})
    EXPECT_NE(page.find(ttft + le + "\"} 1\n"), std::string::npos) << le << "\n" << page;
  EXPECT_NE(page.find("tern:inter_token_latency_seconds_bucket{model_name=\"m\",le=\"0.025\"} 0\n"),
            std::string::npos);
  EXPECT_NE(page.find("tern:kv_cache_usage_perc{model_name=\"m\"} 0.1\n"), std::string::npos);
  EXPECT_NE(page.find("tern:request_prompt_tokens_bucket{model_name=\"m\",le=\"10\"} 1\n"),
            std::string::npos);
  // The sum of an observed 0.1 + 0.2 is the one number that needs 17 digits to read back.
  std::vector<std::string> long_ones = long_numbers(page);
  EXPECT_EQ(long_ones, std::vector<std::string>{"0.30000000000000004"}) << page;
}

TEST(RouterMetrics, BucketBoundsAreVllmsText) {
  router::RouterMetrics metrics;
  metrics.observe_prefill_seconds(0.003);
  metrics.observe_request_seconds(0.9);
  const std::string page = metrics.render({});
  EXPECT_NE(page.find("tern_router:prefill_seconds_bucket{le=\"0.005\"} 1\n"), std::string::npos)
      << page;
  EXPECT_NE(page.find("tern_router:prefill_seconds_bucket{le=\"0.04\"} 1\n"), std::string::npos);
  EXPECT_NE(page.find("tern_router:request_seconds_bucket{le=\"0.8\"} 0\n"), std::string::npos);
  EXPECT_NE(page.find("tern_router:request_seconds_bucket{le=\"1\"} 1\n"), std::string::npos);
  EXPECT_NE(page.find("tern_router:prefill_seconds_sum 0.003\n"), std::string::npos);
  EXPECT_TRUE(long_numbers(page).empty()) << page;
}

}  // namespace
}  // namespace tern::server
