// Adaptive drafting: the expected tokens of a run, the cost table's interpolation, and the
// choices that follow: full K for a cheap good draft, none for a useless or a costly one, none
// for a batch whose verify would cost more than it brings, and the best sequences first.
#include "tern/spec_decode/draft_length_policy.h"

#include <gtest/gtest.h>

#include <vector>

namespace tern {
namespace {

// A bandwidth-bound target: 20 ms for the weights plus 0.5 ms a token; a compute-bound one past
// 64 tokens.
ForwardCosts target_costs() {
  ForwardCosts c;
  for (int64_t n : {1, 2, 3, 4, 5, 8, 16, 32, 64}) c.record(n, 0.020 + 0.0005 * n);
  c.record(512, 0.020 + 0.0005 * 64 + 0.004 * (512 - 64));
  return c;
}

ForwardCosts draft_costs(double per_forward) {
  ForwardCosts c;
  for (int64_t n : {1, 2, 4, 8, 16, 64}) c.record(n, per_forward * (1.0 + 0.01 * n));
  return c;
}

TEST(DraftLengthPolicy, ExpectedTokensOfAGeometricRun) {
  EXPECT_DOUBLE_EQ(expected_tokens(0.0, 4), 1.0);
  EXPECT_DOUBLE_EQ(expected_tokens(1.0, 4), 5.0);
  EXPECT_NEAR(expected_tokens(0.5, 2), 1.75, 1e-12);
  EXPECT_NEAR(expected_tokens(0.8, 4), (1 - 0.32768) / 0.2, 1e-12);
}

TEST(ForwardCosts, InterpolatesAndExtrapolatesWithoutFalling) {
  ForwardCosts c;
  EXPECT_EQ(c.estimate(4), 0.0);
  c.record(2, 1.0);
  EXPECT_DOUBLE_EQ(c.estimate(1), 1.0);  // below the smallest: its cost
  EXPECT_DOUBLE_EQ(c.estimate(4), 2.0);  // one point: proportional
  c.record(6, 3.0);
  EXPECT_DOUBLE_EQ(c.estimate(4), 2.0);
  EXPECT_DOUBLE_EQ(c.estimate(10), 5.0);  // the last slope
  c.record(6, 7.0);                       // a moving average: 3 + 0.25 · (7 − 3)
  EXPECT_DOUBLE_EQ(c.estimate(6), 4.0);
  ForwardCosts falling;
  falling.record(1, 2.0);
  falling.record(2, 1.0);
  EXPECT_DOUBLE_EQ(falling.estimate(100), 1.0);
}

// A step's time limit goes by the upper estimate: past the largest step measured, that step's
// cost per token, whatever the slope of the smaller ones (decodes, nearly flat).
TEST(ForwardCosts, UpperEstimateIsProportionalPastTheLargestMeasured) {
  ForwardCosts c;
  EXPECT_EQ(c.upper_estimate(4), 0.0);
  c.record(1, 0.050);
  c.record(4, 0.052);
  EXPECT_DOUBLE_EQ(c.upper_estimate(2), c.estimate(2));          // within: interpolated
  EXPECT_DOUBLE_EQ(c.upper_estimate(256), 0.052 * 64);           // past: 13 ms a token, 3.3 s
  EXPECT_NEAR(c.estimate(256), 0.052 + 252 * 0.002 / 3, 1e-12);  // the slope: 0.22 s
  c.record(64, 0.2);
  EXPECT_DOUBLE_EQ(c.upper_estimate(128), 0.4);
}

TEST(DraftLengthPolicy, CheapGoodDraftsDraftTheWholeBound) {
  const ForwardCosts target = target_costs(), draft = draft_costs(0.0002);
  const std::vector<DraftCandidate> one = {{0.9, 8, 1}};
  const DraftChoice c = choose_draft_length(one, 0, 8, target, &draft, 1.03);
  EXPECT_EQ(c.num_drafts, 8);
  EXPECT_EQ(c.num_sequences, 1u);
  EXPECT_GT(c.gain, 3.0);
  // n-gram lookup costs nothing; a sequence's own limit caps it.
  const std::vector<DraftCandidate> capped = {{0.9, 2, 0}};
  EXPECT_EQ(choose_draft_length(capped, 0, 8, target, nullptr, 1.03).num_drafts, 2);
}

TEST(DraftLengthPolicy, UselessOrCostlyDraftsStepAside) {
  const ForwardCosts target = target_costs();
  const ForwardCosts cheap = draft_costs(0.0002), costly = draft_costs(0.008);
  const std::vector<DraftCandidate> useless = {{0.02, 8, 1}};
  EXPECT_EQ(choose_draft_length(useless, 0, 8, target, &cheap, 1.03).num_drafts, 0);
  // Good acceptance, but a draft forward at 40% of the target's: a short run at most.
  const std::vector<DraftCandidate> fair = {{0.6, 8, 1}};
  const DraftChoice c = choose_draft_length(fair, 0, 8, target, &costly, 1.03);
  EXPECT_LT(c.num_drafts, 4);
  const std::vector<DraftCandidate> poor = {{0.3, 8, 1}};
  EXPECT_EQ(choose_draft_length(poor, 0, 8, target, &costly, 1.03).num_drafts, 0);
}

TEST(DraftLengthPolicy, ALargeBatchStepsAsideWhereVerifyingCostsMoreThanItBrings) {
  const ForwardCosts target = target_costs(), draft = draft_costs(0.0002);
  // 64 sequences: a verify of 64 × (1 + K) tokens is compute bound.
  const std::vector<DraftCandidate> batch(64, DraftCandidate{0.5, 8, 1});
  EXPECT_EQ(choose_draft_length(batch, 0, 8, target, &draft, 1.03).num_drafts, 0);
  // 4 sequences still gain.
  const std::vector<DraftCandidate> small(4, DraftCandidate{0.5, 8, 1});
  EXPECT_GT(choose_draft_length(small, 0, 8, target, &draft, 1.03).num_drafts, 0);
}

TEST(DraftLengthPolicy, ACatchUpIsSpreadOverTheStepsLeft) {
  // A draft whose cache has yet to see a 1,000-token prompt: 1,000 draft tokens at once cost
  // about four target steps here. Worth it for a long generation, not for the last few tokens.
  const ForwardCosts target = target_costs();
  ForwardCosts draft;
  for (int64_t n : {1, 8, 64, 1024}) draft.record(n, 0.001 + 0.00008 * static_cast<double>(n));
  const std::vector<DraftCandidate> long_run = {{0.8, 4, 1000, 500}};
  EXPECT_GT(choose_draft_length(long_run, 0, 4, target, &draft, 1.03).num_drafts, 0);
  const std::vector<DraftCandidate> short_run = {{0.8, 4, 1000, 5}};
  EXPECT_EQ(choose_draft_length(short_run, 0, 4, target, &draft, 1.03).num_drafts, 0);
}

TEST(DraftLengthPolicy, TheLikeliestSequencesDraftFirst) {
  const ForwardCosts target = target_costs(), draft = draft_costs(0.0002);
  // Sorted by acceptance: 8 sequences that accept well, then 24 that never do. Drafting for
  // the first ones only is worth it; all of them would push the verify past 64 tokens.
  std::vector<DraftCandidate> mixed(8, DraftCandidate{0.9, 4, 1});
  mixed.insert(mixed.end(), 24, DraftCandidate{0.0, 4, 1});
  const DraftChoice c = choose_draft_length(mixed, 0, 4, target, &draft, 1.03);
  EXPECT_GT(c.num_drafts, 0);
  EXPECT_LE(c.num_sequences, 8u);
}

}  // namespace
}  // namespace tern
