// Why adaptive drafting drafts nothing, as the speculator reports it for the log: a draft as
// costly as the target never pays, even when every draft is accepted (the draft being the
// target itself); a cheap one drafts; nothing to propose and disable_by_batch_size are named.
#include "tern/spec_decode/speculator.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace tern {
namespace {

// A bandwidth-bound model: 20 ms for the weights plus 0.5 ms a token.
ForwardCosts costs_scaled(double scale) {
  ForwardCosts c;
  for (int64_t n : {1, 2, 3, 4, 5, 8, 16, 32, 64}) c.record(n, scale * (0.020 + 0.0005 * n));
  return c;
}

// A draft model whose forwards cost `scale` times the target's; it is never asked to draft.
class PricedProposer : public Proposer {
 public:
  explicit PricedProposer(double scale) : costs_(costs_scaled(scale)) {}
  int32_t max_drafts(const Sequence&, int32_t k) const override { return k; }
  void propose(std::span<const DraftRequest>, std::span<const BlockCopy>) override {}
  std::span<const float> draft_probs(size_t) const override { return {}; }
  int64_t draft_vocab_size() const override { return 512; }
  int64_t lag(const Sequence&) const override { return 1; }
  const ForwardCosts* costs() const override { return &costs_; }
  void calibrate(int64_t) override {}

 private:
  ForwardCosts costs_;
};

SpeculativeConfig draft_config(int32_t k, int32_t disable_by_batch_size = 0) {
  SpeculativeConfig c;
  c.method = SpeculativeMethod::kDraftModel;
  c.model = "draft";
  c.num_speculative_tokens = k;
  c.disable_by_batch_size = disable_by_batch_size;
  return c;
}

// The target's step costs (the engine's, which the speculator reads) and the speculator.
struct Priced {
  ForwardCosts target_costs;
  Speculator s;
  Priced(double draft_scale, int32_t disable_by_batch_size)
      : s(draft_config(4, disable_by_batch_size), std::make_unique<PricedProposer>(draft_scale),
          target_costs) {
    for (int64_t n : {1, 2, 3, 4, 5, 8, 16, 32, 64}) target_costs.record(n, 0.020 + 0.0005 * n);
  }
};

struct OneSequence {
  Sequence seq;
  SpecSequenceState state;
  std::vector<Speculator::Candidate> candidates;
  explicit OneSequence(int32_t limit) { candidates = {{&seq, &state, limit, 100}}; }
};

TEST(Speculator, ADraftAsCostlyAsTheTargetNeverDraftsAndSaysWhy) {
  Priced p(1.0, 0);
  Speculator& s = p.s;
  OneSequence one(4);
  s.choose_drafts(one.candidates, 0, 1);
  EXPECT_EQ(one.state.planned, 0);
  const SpecIdle& idle = s.idle();
  EXPECT_EQ(idle.commonest_since({}), SpecIdle::Why::kNoGain);
  EXPECT_GE(idle.k, 1);
  EXPECT_LT(idle.gain, 1.0);
  EXPECT_DOUBLE_EQ(idle.min_gain, 1.03);
  EXPECT_FALSE(idle.acceptance_measured);
  EXPECT_DOUBLE_EQ(idle.acceptance, 0.7);  // the starting guess
  EXPECT_DOUBLE_EQ(idle.draft_seconds, idle.target_seconds);
  const std::string why = idle.describe(SpecIdle::Why::kNoGain);
  EXPECT_NE(why.find("1.00x the target's 20.500 ms (a draft about as costly as the target gains "
                     "little or nothing even when every draft is accepted"),
            std::string::npos)
      << why;
  // Every draft accepted, many times over: the policy is right to stay out all the same, since
  // K drafts cost K target forwards and bring at most K tokens.
  for (int i = 0; i < 50; ++i) s.observe(one.state, 4, 4);
  s.choose_drafts(one.candidates, 0, 1);
  EXPECT_EQ(one.state.planned, 0);
  EXPECT_TRUE(s.idle().acceptance_measured);
  EXPECT_GT(s.idle().acceptance, 0.99);
  EXPECT_LT(s.idle().gain, 1.0);
  const std::string measured = s.idle().describe(SpecIdle::Why::kNoGain);
  EXPECT_NE(measured.find("(measured)"), std::string::npos) << measured;
}

TEST(Speculator, ACheapDraftDraftsAndLeavesNoReason) {
  Priced p(0.05, 0);
  Speculator& s = p.s;
  OneSequence one(4);
  s.choose_drafts(one.candidates, 0, 1);
  EXPECT_EQ(one.state.planned, 4);
  EXPECT_EQ(s.idle().commonest_since({}), std::nullopt);
}

TEST(Speculator, NothingToProposeAndBatchSizeAreTheirOwnReasons) {
  Priced p(0.05, 2);
  Speculator& s = p.s;
  OneSequence none(0);  // its last token, or no n-gram match
  s.choose_drafts(none.candidates, 0, 1);
  EXPECT_EQ(s.idle().commonest_since({}), SpecIdle::Why::kNoProposal);
  const SpecIdle before = s.idle();
  OneSequence one(4);
  s.choose_drafts(one.candidates, 0, 2);
  s.choose_drafts(one.candidates, 0, 3);
  EXPECT_EQ(one.state.planned, 0);
  EXPECT_EQ(s.idle().commonest_since({}), SpecIdle::Why::kBatchSize);
  EXPECT_EQ(s.idle().commonest_since(before), SpecIdle::Why::kBatchSize);
  EXPECT_EQ(s.idle().describe(SpecIdle::Why::kBatchSize),
            "3 sequences run, disable_by_batch_size is 2");
  // A step of prefill only counts for no reason.
  const SpecIdle after = s.idle();
  std::vector<Speculator::Candidate> no_candidates;
  s.choose_drafts(no_candidates, 64, 2);
  EXPECT_EQ(s.idle().commonest_since(after), std::nullopt);
}

}  // namespace
}  // namespace tern
