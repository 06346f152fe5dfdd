// The server's periodic engine log: throughput over the interval, gauges, and speculative
// decoding's acceptance over the same interval.
#include "tern/server/stats_logger.h"

#include <gtest/gtest.h>

namespace tern::server {
namespace {

TEST(StatsLogger, LinesCoverTheIntervalOnly) {
  EngineStats before, after;
  before.generation_tokens = 100;
  after.generation_tokens = 300;
  after.prompt_tokens = 50;
  after.num_running = 3;
  after.kv_cache_usage = 0.25;
  after.prefix_cache_queries = 40;
  after.prefix_cache_hits = 10;
  std::string text = StatsLogger::lines(before, after, 10.0);
  EXPECT_NE(text.find("prompt throughput 5.0 tokens/s, generation throughput 20.0 tokens/s"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("running 3, waiting 0, KV cache usage 25.0%, prefix cache hit rate 25.0%"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("speculative"), std::string::npos);

  before.speculative = after.speculative = true;
  before.spec.num_drafts = 10;
  before.spec.num_draft_tokens = 40;
  before.spec.num_accepted_tokens = 20;
  before.spec.accepted_per_position = {8, 6, 4, 2};
  after.spec.num_drafts = 30;
  after.spec.num_draft_tokens = 120;
  after.spec.num_accepted_tokens = 80;
  after.spec.accepted_per_position = {28, 22, 18, 12};
  text = StatsLogger::lines(before, after, 10.0);
  EXPECT_NE(text.find("acceptance rate 75.0% (60 of 80 draft tokens), mean acceptance length 4.00 "
                      "(20 verifies)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("per-position acceptance 1.00 0.80 0.70 0.50"), std::string::npos) << text;
  EXPECT_TRUE(StatsLogger::lines(after, after, 10.0).empty());  // nothing ran
}

}  // namespace
}  // namespace tern::server
