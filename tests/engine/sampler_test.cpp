#include "tern/engine/sampler.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "tern/core/error.h"

namespace tern {
namespace {

TEST(Sampler, GreedyTakesTheLowestIdOfTheMaximum) {
  Sampler s(SamplingParams{});
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(logits), 1);
  EXPECT_EQ(argmax(logits), 1);
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  Sampler s(p);
  const std::vector<float> logits = {0.1f, 0.3f, 0.2f, 0.25f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(logits), 1);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.6f;
  Sampler s(p);
  // Probabilities ≈ 0.64, 0.24, 0.09, 0.03: 0.6 is reached by the first token alone.
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f, 0.0f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(logits), 0);
}

TEST(Sampler, FrequenciesFollowTheSoftmaxAndTheSeedRepeats) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  Sampler a(p), b(p);
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 0.25, 0.75
  std::map<int32_t, int> counts;
  for (int i = 0; i < 4000; ++i) {
    const int32_t x = a.sample(logits);
    EXPECT_EQ(x, b.sample(logits));
    ++counts[x];
  }
  EXPECT_NEAR(counts[1] / 4000.0, 0.75, 0.03);
}

TEST(Sampler, RejectsBadParams) {
  SamplingParams p;
  p.temperature = -1.0f;
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.top_p = 0.0f;
  EXPECT_THROW(Sampler{p}, Error);
}

}  // namespace
}  // namespace tern
