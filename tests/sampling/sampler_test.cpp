// SamplingParams::validate and the Sampler: greedy, each truncation against a brute-force
// reference, penalties as OpenAI / vLLM define them (seen through greedy choices on crafted
// logits), min_tokens, raw logprobs, and seeds that reproduce whatever else is sampled.
#include "tern/sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tern/core/error.h"

namespace tern {
namespace {

using Logits = std::vector<float>;

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

Sampler make(const SamplingParams& p, uint64_t seed = 1, std::vector<int32_t> prompt = {},
             std::vector<int32_t> suppressed = {}) {
  return Sampler(p, seed, prompt, std::move(suppressed));
}

std::vector<int32_t> run(Sampler& s, const Logits& logits, int steps) {
  std::vector<int32_t> out;
  for (int i = 0; i < steps; ++i) out.push_back(s.sample(logits).token);
  return out;
}

void expect_invalid(const std::function<void(SamplingParams&)>& change, const std::string& field,
                    const std::string& range) {
  SamplingParams p;
  change(p);
  try {
    p.validate();
    ADD_FAILURE() << "accepted an invalid " << field;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(field + " must be", 0), 0u) << message;
    EXPECT_NE(message.find(range), std::string::npos) << message;
  }
  EXPECT_THROW(make(p), Error) << field;
}

TEST(SamplingParams, DefaultsAreValid) { EXPECT_NO_THROW(SamplingParams{}.validate()); }

TEST(SamplingParams, EachFieldOutOfRangeIsNamedWithItsRange) {
  const float nan = std::nanf("");
  const float inf = INFINITY;
  expect_invalid([](SamplingParams& p) { p.n = 0; }, "n", "[1, 128]");
  expect_invalid([](SamplingParams& p) { p.n = 129; }, "n", "caps");
  expect_invalid([](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty",
                 "[-2, 2]");
  expect_invalid([&](SamplingParams& p) { p.presence_penalty = nan; }, "presence_penalty",
                 "[-2, 2]");
  expect_invalid([](SamplingParams& p) { p.frequency_penalty = -2.1f; }, "frequency_penalty",
                 "[-2, 2]");
  expect_invalid([](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty",
                 "> 0");
  expect_invalid([&](SamplingParams& p) { p.repetition_penalty = inf; }, "repetition_penalty",
                 "> 0");
  expect_invalid([](SamplingParams& p) { p.temperature = -0.5f; }, "temperature", ">= 0");
  expect_invalid([&](SamplingParams& p) { p.temperature = inf; }, "temperature", ">= 0");
  expect_invalid([&](SamplingParams& p) { p.temperature = nan; }, "temperature", ">= 0");
  expect_invalid([](SamplingParams& p) { p.top_p = 0.0f; }, "top_p", "(0, 1]");
  expect_invalid([](SamplingParams& p) { p.top_p = 1.01f; }, "top_p", "(0, 1]");
  expect_invalid([](SamplingParams& p) { p.top_k = -2; }, "top_k", "-1 or 0");
  expect_invalid([](SamplingParams& p) { p.min_p = -0.1f; }, "min_p", "[0, 1]");
  expect_invalid([](SamplingParams& p) { p.min_p = 1.5f; }, "min_p", "[0, 1]");
  expect_invalid([](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens", "at least 1");
  expect_invalid([](SamplingParams& p) { p.min_tokens = -1; }, "min_tokens", "[0, max_tokens");
  expect_invalid([](SamplingParams& p) { p.min_tokens = 17; }, "min_tokens", "max_tokens = 16");
  expect_invalid([](SamplingParams& p) { p.logprobs = 21; }, "logprobs", "[0, 20]");
  expect_invalid([](SamplingParams& p) { p.logprobs = -1; }, "logprobs", "[0, 20]");
  expect_invalid([](SamplingParams& p) { p.stop = {"ok", ""}; }, "stop[1]", "non-empty");
  expect_invalid([](SamplingParams& p) { p.stop = {"\xC3"}; }, "stop[0]", "UTF-8");
  expect_invalid([](SamplingParams& p) { p.stop_token_ids = {-3}; }, "stop_token_ids[0]", ">= 0");

  SamplingParams edges;  // the ends of each range are allowed
  edges.n = 128;
  edges.presence_penalty = -2.0f;
  edges.frequency_penalty = 2.0f;
  edges.top_p = 1.0f;
  edges.top_k = -1;
  edges.min_p = 1.0f;
  edges.min_tokens = edges.max_tokens;
  edges.logprobs = 0;
  edges.temperature = 0.0f;
  EXPECT_NO_THROW(edges.validate());
}

TEST(Sampler, GreedyTakesTheLowestIdOfTheMaximum) {
  Sampler s = make(greedy());
  const Logits logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(logits).token, 1);
  EXPECT_EQ(argmax(logits), 1);
  EXPECT_EQ(argmax(Logits{std::nanf(""), 1.0f, 3.0f, 3.0f}), 2);  // NaN never wins
  EXPECT_EQ(s.num_sampled(), 1);
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  Sampler s = make(p);
  const Logits logits = {0.1f, 0.3f, 0.2f, 0.3f};
  for (int32_t t : run(s, logits, 200)) EXPECT_EQ(t, 1);
}

// Reference: temperature → min_p → top_k → top_p by brute force (full sort), as probabilities.
std::vector<double> reference(const Logits& logits, const SamplingParams& p) {
  const size_t n = logits.size();
  std::vector<double> prob(n);
  const float mx = *std::max_element(logits.begin(), logits.end());
  for (size_t i = 0; i < n; ++i) prob[i] = std::exp((logits[i] - mx) / p.temperature);
  const double pmax = 1.0;  // the maximum's weight
  std::vector<bool> keep(n, true);
  for (size_t i = 0; i < n; ++i) keep[i] = prob[i] >= p.min_p * pmax;
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  size_t kept = 0;
  for (int32_t id : order) {
    if (!keep[id]) continue;
    if (p.top_k > 0 && kept >= static_cast<size_t>(p.top_k))
      keep[id] = false;
    else
      ++kept;
  }
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += keep[i] ? prob[i] : 0.0;
  double mass = 0;
  for (int32_t id : order) {
    if (!keep[id]) continue;
    if (mass >= p.top_p * total)
      keep[id] = false;
    else
      mass += prob[id];
  }
  double kept_total = 0;
  for (size_t i = 0; i < n; ++i) kept_total += keep[i] ? prob[i] : 0.0;
  for (size_t i = 0; i < n; ++i) prob[i] = keep[i] ? prob[i] / kept_total : 0.0;
  return prob;
}

// Samples `draws` times and compares frequencies with the reference (±0.02 absolute: with
// 20,000 draws that is more than 4 standard deviations, and the seed is fixed).
void expect_distribution(const Logits& logits, const SamplingParams& p, int draws = 20000) {
  Sampler s = make(p, 1234);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++counts[static_cast<size_t>(s.sample(logits).token)];
  const std::vector<double> want = reference(logits, p);
  for (size_t i = 0; i < logits.size(); ++i) {
    const double got = static_cast<double>(counts[i]) / draws;
    if (want[i] == 0.0)
      EXPECT_EQ(counts[i], 0) << "token " << i << " was cut but sampled";
    else
      EXPECT_NEAR(got, want[i], 0.02) << "token " << i;
  }
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  SamplingParams p;
  p.top_p = 0.6f;
  // Probabilities ≈ 0.64, 0.24, 0.09, 0.03: 0.6 is reached by the first token alone.
  const Logits logits = {3.0f, 2.0f, 1.0f, 0.0f};
  Sampler s = make(p);
  for (int32_t t : run(s, logits, 100)) EXPECT_EQ(t, 0);
  p.top_p = 0.8f;  // the first two (0.88)
  expect_distribution(logits, p);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheTop) {
  SamplingParams p;
  p.min_p = 0.3f;
  // Weights relative to the top: 1, e^-1 ≈ 0.37 (kept), e^-1.5 ≈ 0.22 (cut), e^-3 (cut).
  const Logits logits = {0.0f, -1.0f, -1.5f, -3.0f};
  expect_distribution(logits, p);
  p.temperature = 2.0f;  // min_p is applied after temperature: now e^-0.75 ≈ 0.47 stays
  expect_distribution(logits, p);
}

TEST(Sampler, TemperatureFollowsTheSoftmax) {
  const Logits logits = {0.0f, 1.0f, 2.0f, 0.5f, -1.0f};
  for (float t : {0.5f, 1.0f, 2.0f}) {
    SamplingParams p;
    p.temperature = t;
    expect_distribution(logits, p);
  }
}

TEST(Sampler, TruncationsComposeInVllmOrder) {
  const Logits logits = {2.0f, 1.8f, 1.5f, 1.0f, 0.9f, 0.2f, -0.5f, -3.0f};
  SamplingParams p;
  p.temperature = 0.8f;
  p.min_p = 0.05f;
  p.top_k = 5;
  p.top_p = 0.7f;
  expect_distribution(logits, p);
  p.top_k = -1;
  p.top_p = 0.95f;
  expect_distribution(logits, p);
}

TEST(Sampler, LargeVocabularyDrawsStayInsideTheTruncatedSet) {
  constexpr size_t kVocab = 151936;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  Logits logits(kVocab);
  for (float& v : logits) v = normal(gen);
  struct Case {
    int32_t top_k;
    float top_p;
    float min_p;
  };
  for (const Case& c : {Case{20, 0.9f, 0.0f}, Case{0, 0.9f, 0.0f}, Case{0, 1.0f, 0.2f},
                        Case{2000, 1.0f, 0.0f}, Case{5000, 0.5f, 0.01f}}) {
    SamplingParams p;
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    const std::vector<double> want = reference(logits, p);
    Sampler s = make(p, 99);
    for (int i = 0; i < 100; ++i) {
      const int32_t t = s.sample(logits).token;
      ASSERT_GT(want[static_cast<size_t>(t)], 0.0)
          << "top_k " << c.top_k << " top_p " << c.top_p << " min_p " << c.min_p << ": " << t;
    }
  }
}

TEST(Sampler, ASeedReproducesAndOtherSamplersDoNotDisturbIt) {
  SamplingParams p;
  p.top_p = 0.9f;
  const Logits logits = {0.1f, 0.5f, 0.2f, 0.9f, 0.4f, 0.3f, 0.0f, 0.8f};
  Sampler a = make(p, 42), b = make(p, 42), other = make(p, 7), third = make(greedy(), 42);
  const std::vector<int32_t> alone = run(a, logits, 300);
  std::vector<int32_t> interleaved;
  for (int i = 0; i < 300; ++i) {
    other.sample(logits);
    interleaved.push_back(b.sample(logits).token);
    third.sample(logits);
  }
  EXPECT_EQ(alone, interleaved);
  Sampler c = make(p, 43);
  EXPECT_NE(run(c, logits, 300), alone);
  EXPECT_EQ(std::set<int32_t>(alone.begin(), alone.end()).size(), 7u);  // the 0.0 is cut
}

TEST(Sampler, OneDrawPerStepWhateverThePath) {
  // Both samplers draw the same random numbers: a row with one possible token, or a row with
  // top_k cut, still uses up exactly one draw, so the next free draw lines up.
  SamplingParams p;
  p.min_p = 0.5f;
  const Logits free = {0.0f, 0.1f, 0.2f, 0.3f};
  const Logits forced = {-INFINITY, 5.0f, -INFINITY, -INFINITY};
  const Logits wide = {9.0f, 0.0f, 0.0f, 8.0f};
  Sampler a = make(p, 5), b = make(p, 5);
  for (int i = 0; i < 200; ++i) {
    a.sample(forced);
    b.sample(wide);
    EXPECT_EQ(a.sample(free).token, b.sample(free).token) << "step " << i;
  }
}

TEST(Sampler, PresencePenaltyCountsOnce) {
  SamplingParams p = greedy();
  p.presence_penalty = 0.5f;
  Sampler s = make(p);
  // 1.0 → 0.5 after token 0 is used, below 0.8; then 0.8 → 0.3, and 0.5 wins for good.
  EXPECT_EQ(run(s, {1.0f, 0.8f}, 5), (std::vector<int32_t>{0, 1, 0, 0, 0}));
}

TEST(Sampler, FrequencyPenaltyGrowsWithTheCount) {
  SamplingParams p = greedy();
  p.frequency_penalty = 0.1f;
  Sampler s = make(p);
  // Token 0 loses 0.1 per use: 1.0, 0.9, 0.8, then 0.7 < 0.75.
  EXPECT_EQ(run(s, {1.0f, 0.75f}, 4), (std::vector<int32_t>{0, 0, 0, 1}));
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p = greedy();
  p.repetition_penalty = 1.5f;
  Sampler positive = make(p, 1, /*prompt=*/{0});  // 2.0 / 1.5 ≈ 1.33 < 1.5
  EXPECT_EQ(positive.sample(Logits{2.0f, 1.5f}).token, 1);
  Sampler negative = make(p, 1, /*prompt=*/{0, 0});  // -1.0 × 1.5 = -1.5 < -1.2
  EXPECT_EQ(negative.sample(Logits{-1.0f, -1.2f}).token, 1);
  // Output tokens too, once per token whatever its count: 0, then 1 (1.33 < 1.5), then 0
  // (1.33 > 1.0) for good.
  Sampler output = make(p);
  EXPECT_EQ(run(output, {2.0f, 1.5f}, 5), (std::vector<int32_t>{0, 1, 0, 0, 0}));
}

TEST(Sampler, PenaltiesApplyWhenSamplingToo) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 1;
  p.frequency_penalty = 0.1f;
  Sampler s = make(p);
  EXPECT_EQ(run(s, {1.0f, 0.75f}, 4), (std::vector<int32_t>{0, 0, 0, 1}));
}

TEST(Sampler, MinTokensSuppressesEosAndStopIdsUntilTheCount) {
  SamplingParams p = greedy();
  p.min_tokens = 3;
  const Logits logits = {0.0f, 1.0f, 9.0f, 8.0f};  // 2: EOS, 3: a stop id
  Sampler s = make(p, 1, {}, {2, 3});
  EXPECT_EQ(run(s, logits, 4), (std::vector<int32_t>{1, 1, 1, 2}));

  SamplingParams sampled;
  sampled.max_tokens = 60;
  sampled.min_tokens = 50;
  Sampler t = make(sampled, 3, {}, {2, 3});
  const std::vector<int32_t> got = run(t, logits, 60);
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(got[i] == 0 || got[i] == 1) << i;
  EXPECT_TRUE(std::count(got.begin() + 50, got.end(), 2) > 0);
}

TEST(Sampler, LogprobsAreTheRawLogSoftmaxWithTheTopSorted) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.presence_penalty = 1.5f;  // penalties and temperature change the draw, not the logprobs
  p.logprobs = 3;
  const Logits logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f};
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v));
  auto log_softmax = [&](int32_t id) { return static_cast<double>(logits[id]) - std::log(sum); };
  Sampler s = make(p, 11);
  for (int step = 0; step < 20; ++step) {
    const SampledToken t = s.sample(logits);
    EXPECT_NEAR(t.logprob, log_softmax(t.token), 1e-6);
    ASSERT_EQ(t.top.size(), 3u);
    EXPECT_EQ(t.top[0].token, 1);  // the tie of 1 and 3 goes to the lower id
    EXPECT_EQ(t.top[1].token, 3);
    EXPECT_EQ(t.top[2].token, 4);
    for (const TokenLogprob& lp : t.top) EXPECT_NEAR(lp.logprob, log_softmax(lp.token), 1e-6);
  }
  p.logprobs = 0;  // the sampled token's alone
  Sampler none = make(p);
  const SampledToken t = none.sample(logits);
  EXPECT_TRUE(t.top.empty());
  EXPECT_NEAR(t.logprob, log_softmax(t.token), 1e-6);
}

TEST(Sampler, BadRowsNeverCrash) {
  SamplingParams p;
  p.top_k = 2;
  p.top_p = 0.5f;
  p.logprobs = 2;
  Sampler s = make(p, 1, {}, {});
  const Logits nan_row = {std::nanf(""), 1.0f, std::nanf(""), 0.5f};
  for (int i = 0; i < 20; ++i) {
    const int32_t t = s.sample(nan_row).token;
    EXPECT_TRUE(t == 1 || t == 3);
  }
  EXPECT_EQ(s.sample(Logits{-INFINITY, -INFINITY}).token, 0);
  EXPECT_EQ(s.sample(Logits{0.0f, INFINITY, INFINITY}).token, 1);
  SamplingParams q;
  q.min_tokens = 2;
  Sampler out_of_range = make(q, 1, {}, {-5, 1000});  // ids outside the row are ignored
  EXPECT_LT(out_of_range.sample(Logits{0.0f, 1.0f}).token, 2);
}

}  // namespace
}  // namespace tern
