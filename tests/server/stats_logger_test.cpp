// The server's periodic engine log: throughput over the interval, gauges, speculative
// decoding's acceptance over the same interval or why it drafted nothing, and a rate-limited
// warning when steps run far slower than their shapes ran before.
#include "tern/server/stats_logger.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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

// `after` with `steps` more steps of `why` than `before`.
void idle_steps(EngineStats& after, SpecIdle::Why why, int64_t steps) {
  after.spec_idle.steps[static_cast<size_t>(why)] += steps;
}

TEST(StatsLogger, IdleSpeculationSaysWhy) {
  EngineStats before, after;
  before.speculative = after.speculative = true;
  after.generation_tokens = 100;
  after.spec_idle.k = 4;
  after.spec_idle.acceptance = 0.7;
  after.spec_idle.gain = 0.62;
  after.spec_idle.min_gain = 1.03;
  after.spec_idle.target_seconds = after.spec_idle.draft_seconds = 0.0004;
  after.spec_idle.num_running = 9;
  after.spec_idle.disable_by_batch_size = 8;
  // The steps before the interval count for nothing: in it, the policy saw no gain.
  idle_steps(before, SpecIdle::Why::kBatchSize, 50);
  idle_steps(after, SpecIdle::Why::kBatchSize, 50);
  idle_steps(after, SpecIdle::Why::kNoProposal, 3);  // the last token of each request
  idle_steps(after, SpecIdle::Why::kNoGain, 97);
  std::string text = StatsLogger::lines(before, after, 10.0);
  EXPECT_NE(text.find("speculative decoding: no drafts: adaptive drafting found no plan faster "
                      "than plain decoding: its best, K = 4 at an acceptance of 70% (assumed: "
                      "nothing verified yet), promises 0.62x plain decoding's tokens/s and it "
                      "drafts from 1.03x on; a draft forward costs 0.400 ms, 1.00x the target's "
                      "0.400 ms (a draft about as costly as the target gains little or nothing"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("acceptance rate"), std::string::npos) << text;
  idle_steps(after, SpecIdle::Why::kBatchSize, 200);
  EXPECT_NE(StatsLogger::lines(before, after, 10.0)
                .find("no drafts: 9 sequences run, disable_by_batch_size is 8"),
            std::string::npos);
  idle_steps(after, SpecIdle::Why::kNoProposal, 500);
  EXPECT_NE(StatsLogger::lines(before, after, 10.0)
                .find("no drafts: no decoding sequence had a draft to propose"),
            std::string::npos);
  EngineStats no_reason = after;  // tokens, but no step that could have drafted
  no_reason.generation_tokens = 0;
  EXPECT_NE(StatsLogger::lines(no_reason, after, 10.0).find("no drafts: no step had a sequence"),
            std::string::npos);
  // A cheap draft that the policy found no use for (poor acceptance) is no hint to change it.
  after.spec_idle.acceptance = 0.05;
  after.spec_idle.acceptance_measured = true;
  after.spec_idle.target_seconds = 0.01;
  after.spec_idle.draft_seconds = 0.001;
  text = after.spec_idle.describe(SpecIdle::Why::kNoGain);
  EXPECT_NE(text.find("acceptance of 5% (measured)"), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("0.10x the target's 10.000 ms")) << text;
  // Drafts in the interval: the acceptance line, not a reason.
  after.spec.num_drafts = 2;
  after.spec.num_draft_tokens = 8;
  after.spec.num_accepted_tokens = 8;
  after.spec.accepted_per_position = {2, 2, 2, 2};
  text = StatsLogger::lines(before, after, 10.0);
  EXPECT_NE(text.find("speculative decoding: acceptance rate 100.0%"), std::string::npos) << text;
  EXPECT_EQ(text.find("no drafts"), std::string::npos) << text;
}

EngineStats with_steps(int64_t steps, double seconds, double reference_seconds) {
  EngineStats s;
  s.generation_tokens = steps;
  s.step_times = {steps, seconds, reference_seconds};
  return s;
}

TEST(StatsLogger, StepsFarSlowerThanBeforeAreAWarning) {
  const EngineStats start = with_steps(100, 0.1, 0.1);
  // 50 steps of 20 ms where the same shapes ran in 1 ms: 20x.
  const EngineStats slow = with_steps(150, 0.1 + 1.0, 0.1 + 0.05);
  EXPECT_EQ(StatsLogger::slow_step_warning(start, slow),
            "engine: warning: steps ran 20x slower than the same steps ran before (20.000 ms "
            "against 1.000 ms on average over 50 steps): the cores are likely contended (other "
            "processes, or --threads beyond the free cores) or the weights swapped out\n");
  // 5x slower: a busy machine, not a collapse.
  EXPECT_EQ(StatsLogger::slow_step_warning(start, with_steps(150, 0.1 + 0.25, 0.1 + 0.05)), "");
  // Three steps are no evidence; no steps with a known shape, nothing to say.
  EXPECT_EQ(StatsLogger::slow_step_warning(start, with_steps(103, 0.1 + 3.0, 0.1 + 0.003)), "");
  EXPECT_EQ(StatsLogger::slow_step_warning(start, start), "");
}

TEST(StatsLogger, TheSlowStepWarningComesAtMostOnceAMinute) {
  std::vector<std::string> written;
  StatsLogger logger(10.0, [&](const std::string& text) { written.push_back(text); });
  auto warnings = [&] {
    int n = 0;
    for (const std::string& t : written)
      n += t.find("engine: warning: steps ran") != std::string::npos;
    return n;
  };
  // Every 10 s, 100 more steps of 20 ms whose shapes ran in 1 ms before.
  double now = 1000.0;
  logger.observe(with_steps(0, 0.0, 0.0), now);
  for (int i = 1; i <= 12; ++i)
    logger.observe(with_steps(100 * i, 2.0 * i, 0.1 * i), now + 10.0 * i);
  EXPECT_EQ(written.size(), 12u);  // a throughput line every interval
  EXPECT_EQ(warnings(), 2);        // at 10 s and at 70 s
  ASSERT_GE(written.size(), 7u);
  EXPECT_NE(written[0].find("20x slower"), std::string::npos) << written[0];
  EXPECT_NE(written[6].find("20x slower"), std::string::npos) << written[6];
  // Disabled: nothing at all.
  std::vector<std::string> none;
  StatsLogger off(0.0, [&](const std::string& text) { none.push_back(text); });
  for (int i = 0; i <= 12; ++i) off.observe(with_steps(100 * i, 2.0 * i, 0.1 * i), now + 10.0 * i);
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace tern::server
