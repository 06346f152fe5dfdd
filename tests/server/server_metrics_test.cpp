// The Prometheus text of tern serve's and tern router's /metrics: numbers and bucket bounds in
// their shortest round-trip form, so dashboards written for vLLM (le="0.005") select them.
#include "tern/server/server_metrics.h"

#include <gtest/gtest.h>

#include <limits>
#include <regex>
#include <sstream>
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
  // The sum of an observed 0.1 + 0.2 is the one number that needs 17 digits to read back
  // (three times: vllm:inter_token_latency_seconds, its older name, and tern's).
  std::vector<std::string> long_ones = long_numbers(page);
  EXPECT_EQ(long_ones, std::vector<std::string>(3, "0.30000000000000004")) << page;
}

// What the Gateway API Inference Extension's endpoint picker, llm-d's autoscaler and
// production-stack read, by vLLM's names: every family with its # TYPE, every sample with
// model_name.
TEST(ServerMetrics, VllmsNamesForTheStackThatReadsThem) {
  ServerMetrics metrics(2048, MetricNames::Vllm);
  RequestMetrics m;
  m.arrival_time = 0.0;
  m.first_scheduled_time = 0.01;
  m.first_token_time = 0.1;
  m.last_token_time = 0.5;
  m.finished_time = 0.5;
  m.num_prompt_tokens = 30;
  m.num_generation_tokens = 5;
  metrics.observe_finished(m, "length");
  EngineStats stats;
  stats.num_running = 3;
  stats.num_waiting = 2;
  stats.kv_cache_usage = 0.25;
  stats.num_blocks = 614;
  stats.block_size = 16;
  stats.prefix_caching = true;
  stats.prefix_cache_queries = 40;
  stats.prefix_cache_hits = 16;
  const std::string page = metrics.render("qwen", stats);
  const std::pair<const char*, const char*> families[] = {
      {"vllm:num_requests_waiting", "gauge"},
      {"vllm:num_requests_running", "gauge"},
      {"vllm:kv_cache_usage_perc", "gauge"},
      {"vllm:gpu_cache_usage_perc", "gauge"},
      {"vllm:cache_config_info", "gauge"},
      {"vllm:prefix_cache_queries_total", "counter"},
      {"vllm:prefix_cache_hits_total", "counter"},
      {"vllm:request_success_total", "counter"},
      {"vllm:time_to_first_token_seconds", "histogram"},
      {"vllm:time_per_output_token_seconds", "histogram"},
      {"vllm:inter_token_latency_seconds", "histogram"},
      {"vllm:request_time_per_output_token_seconds", "histogram"},
      {"vllm:request_prompt_tokens", "histogram"},
      {"vllm:request_generation_tokens", "histogram"},
      {"tern:kv_cache_capacity_tokens", "gauge"},  // tern's own: no vLLM name
  };
  for (const auto& [name, type] : families)
    EXPECT_NE(page.find("# TYPE " + std::string(name) + " " + type + "\n"), std::string::npos)
        << name;
  EXPECT_EQ(page.find("tern:num_requests"), std::string::npos) << "vllm only";
  EXPECT_NE(page.find("vllm:num_requests_waiting{model_name=\"qwen\"} 2\n"), std::string::npos);
  EXPECT_NE(page.find("vllm:kv_cache_usage_perc{model_name=\"qwen\"} 0.25\n"), std::string::npos);
  EXPECT_NE(page.find("vllm:cache_config_info{model_name=\"qwen\",block_size=\"16\",cache_dtype="
                      "\"f16\",enable_prefix_caching=\"True\",num_gpu_blocks=\"614\"} 1\n"),
            std::string::npos)
      << page;
  // One request of 5 tokens over 0.4 s after its first: 0.1 s per output token.
  EXPECT_NE(page.find("vllm:request_time_per_output_token_seconds_sum{model_name=\"qwen\"} 0.1\n"),
            std::string::npos);
  EXPECT_NE(
      page.find("vllm:request_success_total{model_name=\"qwen\",finished_reason=\"length\"} 1"),
      std::string::npos);
  // Every sample line carries the model's name.
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] != '#') {
      EXPECT_NE(line.find("model_name=\"qwen\""), std::string::npos) << line;
    }
  }

  const std::string tern_page = ServerMetrics(2048, MetricNames::Tern).render("qwen", stats);
  EXPECT_EQ(tern_page.find("vllm:"), std::string::npos);
  EXPECT_NE(tern_page.find("# TYPE tern:num_requests_waiting gauge"), std::string::npos);
  EXPECT_EQ(parse_metric_names("vllm"), MetricNames::Vllm);
  EXPECT_EQ(parse_metric_names("both"), MetricNames::Both);
  EXPECT_EQ(parse_metric_names("tern"), MetricNames::Tern);
  EXPECT_FALSE(parse_metric_names("prometheus"));
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
