// The spec-decode counters a serving benchmark scrapes: tern's and vLLM's names, summed over
// label sets, and the run's acceptance from their change.
#include "tern/bench/spec_decode_metrics.h"

#include <gtest/gtest.h>

namespace tern::bench {
namespace {

TEST(SpecDecodeMetrics, ParsesTernsAndVllmsCountersSummedOverLabels) {
  const SpecDecodeCounters c = parse_spec_decode_counters(
      "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
      "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 12\n"
      "vllm:spec_decode_num_drafts_total{engine=\"1\",model_name=\"m\"} 8\n"
      "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"} 80.0\n"
      "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 50\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"0\"} 18\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"3\",model_name=\"m\"} 2\n"
      "vllm:spec_decode_num_drafts_created 1.7e9\n"
      "vllm:num_requests_running{model_name=\"m\"} 3\n"
      "tern:spec_decode_num_draft_tokens_total{model_name=\"m\"} not-a-number\n");
  EXPECT_TRUE(c.found);
  EXPECT_EQ(c.drafts, 20);
  EXPECT_EQ(c.draft_tokens, 80);
  EXPECT_EQ(c.accepted_tokens, 50);
  EXPECT_EQ(c.accepted_per_position.at(0), 18);
  EXPECT_EQ(c.accepted_per_position.at(3), 2);
  EXPECT_FALSE(parse_spec_decode_counters("tern:num_requests_running{model_name=\"m\"} 0\n").found);
}

TEST(SpecDecodeMetrics, TheRunsAcceptanceFromTheChange) {
  SpecDecodeCounters before, after;
  before.found = after.found = true;
  before.drafts = 5;
  after.drafts = 15;
  after.draft_tokens = 40;
  after.accepted_tokens = 30;
  before.accepted_per_position = {{0, 1}};
  after.accepted_per_position = {{0, 9}, {1, 7}};
  const std::string s = spec_decode_section(before, after);
  EXPECT_NE(s.find("Acceptance rate (%):                     75.00"), std::string::npos) << s;
  EXPECT_NE(s.find("Acceptance length:                       4.00"), std::string::npos) << s;
  EXPECT_NE(s.find("  Position 0:                            80.00"), std::string::npos) << s;
  EXPECT_NE(s.find("  Position 1:                            70.00"), std::string::npos) << s;
  const auto j = spec_decode_json(before, after);
  EXPECT_DOUBLE_EQ(j["spec_decode_num_drafts"].get<double>(), 10);
  // Nothing drafted during the run: no section.
  EXPECT_TRUE(spec_decode_section(after, after).empty());
  EXPECT_TRUE(spec_decode_json(after, after).is_null());
}

}  // namespace
}  // namespace tern::bench
