// Rejection sampling keeps the target's distribution: over many seeds, proposing K = 2 drafts
// from a draft distribution q that often disagrees and verifying them against p gives the
// same joint distribution of the first two tokens as plain sampling, for every sampling
// parameter (temperature, top_k, top_p, min_p, penalties, min_tokens), for point-mass drafts
// (n-gram) and for a draft with fewer vocabulary rows. Greedy accepts exactly the argmax run.
#include "tern/spec_decode/rejection_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>
#include <vector>

namespace tern {
namespace {

constexpr int64_t kVocab = 6;

// Rows of raw logits: the target's 3 (after the last token, after draft 1, after draft 2) and
// the draft's 2. The draft prefers other tokens than the target does.
const std::vector<float> kTarget = {2.0f, 1.5f, 0.2f, -0.5f, 1.0f,  -1.0f,   // row 0
                                    0.1f, 1.7f, 2.2f, 0.0f,  -0.4f, 0.9f,    // row 1
                                    1.0f, 0.0f, 0.5f, 1.5f,  0.3f,  -0.2f};  // row 2 (bonus)
const std::vector<float> kDraft = {0.5f, 2.5f, 0.0f, 1.0f, -0.5f, 0.3f,      // q of draft 1
                                   1.5f, 0.2f, 1.0f, 1.2f, 0.5f,  -0.3f};    // q of draft 2

using Joint = std::map<std::pair<int32_t, int32_t>, double>;

// What a test may plant: the same loop as the draft model proposer, then verify_drafts, then
// plain sampling of the second token when the verify gave only one.
Joint speculative(const SamplingParams& params, int trials, const std::vector<float>& draft,
                  int64_t draft_vocab, bool point_mass, std::vector<int32_t> fixed_drafts = {}) {
  Joint counts;
  std::vector<float> q(2 * static_cast<size_t>(draft_vocab));
  VerifiedTokens out;
  for (int t = 0; t < trials; ++t) {
    Sampler s(params, 1000 + static_cast<uint64_t>(t), {}, {0});
    std::vector<int32_t> drafts = fixed_drafts;
    if (drafts.empty()) {
      for (size_t j = 0; j < 2; ++j) {
        const auto row = std::span<const float>(draft).subspan(j * draft_vocab, draft_vocab);
        const auto qj = std::span<float>(q).subspan(j * draft_vocab, draft_vocab);
        s.probabilities(row, qj);
        drafts.push_back(pick_weighted(qj, s.uniform_for_draft()));
        s.record(drafts.back());
      }
      for (auto it = drafts.rbegin(); it != drafts.rend(); ++it) s.forget(*it);
    }
    verify_drafts(s, kTarget, kVocab, drafts, point_mass ? std::span<const float>() : q,
                  draft_vocab, out);
    const int32_t t1 = out.tokens[0].token;
    const int32_t t2 =
        out.tokens.size() > 1
            ? out.tokens[1].token
            : s.sample(std::span<const float>(kTarget).subspan(kVocab, kVocab)).token;
    counts[{t1, t2}] += 1.0 / trials;
  }
  return counts;
}

// Plain autoregressive sampling's exact joint: p(t1) · p(t2 | t1 recorded).
Joint exact(const SamplingParams& params) {
  Joint out;
  std::vector<float> p0(kVocab), p1(kVocab);
  Sampler s(params, 1, {}, {0});
  s.probabilities(std::span<const float>(kTarget).first(kVocab), p0);
  for (int32_t t1 = 0; t1 < kVocab; ++t1) {
    if (p0[static_cast<size_t>(t1)] == 0.0f) continue;
    Sampler after(params, 1, {}, {0});
    after.record(t1);
    after.probabilities(std::span<const float>(kTarget).subspan(kVocab, kVocab), p1);
    for (int32_t t2 = 0; t2 < kVocab; ++t2)
      if (p1[static_cast<size_t>(t2)] > 0.0f)
        out[{t1, t2}] = p0[static_cast<size_t>(t1)] * p1[static_cast<size_t>(t2)];
  }
  return out;
}

double total_variation(const Joint& a, const Joint& b) {
  double tv = 0.0;
  for (const auto& [k, v] : a) tv += std::abs(v - (b.count(k) ? b.at(k) : 0.0));
  for (const auto& [k, v] : b)
    if (!a.count(k)) tv += v;
  return tv / 2.0;
}

// The expected total variation of an empirical distribution of n samples from `p`:
// ½ Σ E|p̂ − p| with E|p̂ − p| ≈ sqrt(2 p (1 − p) / (π n)).
double expected_noise(const Joint& p, int n) {
  double tv = 0.0;
  for (const auto& [k, v] : p) tv += std::sqrt(2.0 * v * (1.0 - v) / (std::numbers::pi * n));
  return tv / 2.0;
}

SamplingParams sampling(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  p.max_tokens = 100;
  return p;
}

void expect_same_distribution(const SamplingParams& params, const std::string& what,
                              const std::vector<float>& draft = kDraft,
                              int64_t draft_vocab = kVocab, bool point_mass = false,
                              std::vector<int32_t> fixed = {}) {
  constexpr int kTrials = 20000;
  const Joint want = exact(params);
  const Joint got = speculative(params, kTrials, draft, draft_vocab, point_mass, fixed);
  const double tv = total_variation(got, want), noise = expected_noise(want, kTrials);
  // Seeds are fixed, so this is deterministic; 2.5× the expected sampling noise leaves room
  // for a correct sampler and none for a lossy one (a planted bug gives 5-20× it here).
  EXPECT_LT(tv, 2.5 * noise) << what << ": total variation " << tv << ", noise " << noise;
}

TEST(RejectionSampler, KeepsTheTargetDistributionForEverySamplingParameter) {
  expect_same_distribution(sampling(1.0f), "temperature 1");
  SamplingParams truncated = sampling(0.7f);
  truncated.top_k = 4;
  truncated.top_p = 0.9f;
  expect_same_distribution(truncated, "temperature 0.7, top_k 4, top_p 0.9");
  SamplingParams min_p = sampling(1.3f);
  min_p.min_p = 0.1f;
  expect_same_distribution(min_p, "temperature 1.3, min_p 0.1");
  SamplingParams penalties = sampling(1.0f);
  penalties.presence_penalty = 1.0f;
  penalties.frequency_penalty = 0.5f;
  penalties.repetition_penalty = 1.3f;
  expect_same_distribution(penalties, "presence, frequency and repetition penalties");
  SamplingParams min_tokens = sampling(1.0f);
  min_tokens.min_tokens = 2;  // id 0 (the "EOS" of these samplers) impossible for both tokens
  expect_same_distribution(min_tokens, "min_tokens 2");
}

TEST(RejectionSampler, PointMassDraftsAndASmallerDraftVocabularyToo) {
  expect_same_distribution(sampling(1.0f), "n-gram drafts of likely tokens", kDraft, kVocab, true,
                           {0, 2});
  expect_same_distribution(sampling(0.8f), "n-gram drafts of unlikely tokens", kDraft, kVocab, true,
                           {5, 3});
  // A draft with 4 rows of logits: q is 0 for ids 4 and 5.
  std::vector<float> narrow;
  for (size_t j = 0; j < 2; ++j)
    for (size_t i = 0; i < 4; ++i) narrow.push_back(kDraft[j * kVocab + i]);
  expect_same_distribution(sampling(1.0f), "a draft with fewer vocabulary rows", narrow, 4);
}

TEST(RejectionSampler, GreedyAcceptsTheArgmaxRunThenTheTargetsToken) {
  SamplingParams greedy = sampling(0.0f);
  greedy.logprobs = 2;
  VerifiedTokens out;
  Sampler s(greedy, 1, {}, {});
  // Row argmaxes: 0, 2, 3.
  const std::vector<int32_t> right = {0, 2};
  verify_drafts(s, kTarget, kVocab, right, {}, kVocab, out);
  ASSERT_EQ(out.tokens.size(), 3u);
  EXPECT_EQ(out.num_accepted, 2);
  EXPECT_EQ(out.tokens[2].token, 3);        // the bonus
  EXPECT_EQ(out.tokens[0].top.size(), 2u);  // the target's logprobs, as sample() reports them
  Sampler plain(greedy, 1, {}, {});
  const SampledToken first = plain.sample(std::span<const float>(kTarget).first(kVocab));
  EXPECT_EQ(first.logprob, out.tokens[0].logprob);
  EXPECT_EQ(s.num_sampled(), 3);

  Sampler t(greedy, 1, {}, {});
  const std::vector<int32_t> wrong = {0, 1};
  verify_drafts(t, kTarget, kVocab, wrong, {}, kVocab, out);
  ASSERT_EQ(out.tokens.size(), 2u);
  EXPECT_EQ(out.num_accepted, 1);
  EXPECT_EQ(out.tokens[1].token, 2);  // the target's argmax, not the draft

  // A presence penalty that the verify's own records feed: after 0 and 2 are emitted, row 2's
  // argmax 3 still wins, but a penalty of 2 on a repeated draft changes row 1's choice.
  SamplingParams penalized = greedy;
  penalized.presence_penalty = 2.0f;
  Sampler u(penalized, 1, {}, {});
  u.record(2);  // 2 was output before: row 1's 2.2 drops to 0.2, so 1 (1.7) wins
  verify_drafts(u, kTarget, kVocab, right, {}, kVocab, out);
  ASSERT_EQ(out.tokens.size(), 2u);
  EXPECT_EQ(out.tokens[1].token, 1);
}

}  // namespace
}  // namespace tern
