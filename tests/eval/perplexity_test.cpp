// perplexity() on stories260K against an independent token-by-token computation, the same
// result for every batch size, llama-perplexity's windows and refusals.
#include "tern/eval/perplexity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/engine_test_util.h"
#include "eval/eval_test_util.h"
#include "tern/core/error.h"
#include "tern/eval/window_runner.h"

namespace tern {
namespace {

using testing::reference_nll;
using testing::story_text;

constexpr int64_t kCtx = 64;

class Perplexity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(testing::fixture("stories260K/stories260K.gguf"))) return;
    model_ = testing::stories260k();
    decoder_.emplace(model_->config, model_->weights, find_device("cpu"));
  }
  LoadedModel& model() { return *model_; }
  Decoder& decoder() { return *decoder_; }
  EvalWindows windows(int64_t ctx = kCtx, int64_t max_windows = -1) {
    return tokenize_eval_windows(*model_->tokenizer, story_text(120), ctx, max_windows);
  }

 private:
  std::optional<LoadedModel> model_;
  std::optional<Decoder> decoder_;
};

TEST_F(Perplexity, WindowsAreLlamaCppsCutOfTheText) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::vector<int32_t> all = model().tokenizer->encode(story_text(120));
  const EvalWindows w = windows();
  ASSERT_GE(all.size(), static_cast<size_t>(4 * kCtx));  // a text of several windows
  EXPECT_EQ(all[0], 1);  // stories260K's tokenizer adds BOS, so windows start with it
  EXPECT_EQ(w.bos, 1);
  EXPECT_EQ(w.num_windows(), static_cast<int64_t>(all.size()) / kCtx);
  EXPECT_EQ(w.scored_per_window(), kCtx - 1 - kCtx / 2);
  EXPECT_TRUE(std::equal(w.tokens.begin(), w.tokens.end(), all.begin()));
  EXPECT_EQ(w.target(1, 0), all[static_cast<size_t>(kCtx + kCtx / 2 + 1)]);
  EXPECT_EQ(windows(kCtx, 3).num_windows(), 3);
  // Special tokens' text is text (llama-perplexity tokenizes without parse_special).
  const EvalWindows special =
      tokenize_eval_windows(*model().tokenizer, "</s><s> " + story_text(120), kCtx);
  EXPECT_EQ(std::count(special.tokens.begin(), special.tokens.end(), 2), 0);
  EXPECT_EQ(std::count(special.tokens.begin(), special.tokens.end(), 1), 1);
}

TEST_F(Perplexity, EqualsTokenByTokenReference) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const EvalWindows w = windows();
  const PerplexityResult r = perplexity(decoder(), w, 2048);
  const std::vector<double> nll = reference_nll(decoder(), w);
  ASSERT_EQ(static_cast<int64_t>(nll.size()), r.count);
  const double n = static_cast<double>(nll.size());
  const double mean = std::accumulate(nll.begin(), nll.end(), 0.0) / n;
  double mean2 = 0.0;
  for (double v : nll) mean2 += v * v / n;
  const double ppl = std::exp(mean);
  EXPECT_NEAR(r.ppl, ppl, 1e-4 * ppl);
  EXPECT_NEAR(r.uncertainty, ppl * std::sqrt((mean2 - mean * mean) / (n - 1)),
              1e-3 * r.uncertainty);
  EXPECT_GT(r.uncertainty, 0.0);
  EXPECT_GT(r.ppl, 1.5);  // a real model on a real text: neither certain nor uniform (512)
  EXPECT_LT(r.ppl, 100.0);
  ASSERT_EQ(static_cast<int64_t>(r.window_ppl.size()), w.num_windows());
  ASSERT_EQ(r.running_ppl.size(), r.window_ppl.size());
  EXPECT_DOUBLE_EQ(r.running_ppl.back(), r.ppl);
  // Window 2 alone, from the reference's NLLs.
  const int64_t s = w.scored_per_window();
  const double window2 = std::accumulate(nll.begin() + 2 * s, nll.begin() + 3 * s, 0.0) / s;
  EXPECT_NEAR(r.window_ppl[2], std::exp(window2), 1e-4 * std::exp(window2));
}

TEST_F(Perplexity, SameForEveryBatchSize) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const EvalWindows w = windows();
  const PerplexityResult many = perplexity(decoder(), w, 2048);  // all windows in one forward
  ASSERT_EQ(windows_per_forward(kCtx, 2048), 32);
  for (int64_t batch : {kCtx, 3 * kCtx, 5 * kCtx + 7, int64_t{20}, int64_t{1}}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const PerplexityResult r = perplexity(decoder(), w, batch);
    EXPECT_DOUBLE_EQ(r.ppl, many.ppl);
    EXPECT_DOUBLE_EQ(r.uncertainty, many.uncertainty);
    EXPECT_EQ(r.window_ppl, many.window_ppl);
  }
}

TEST_F(Perplexity, ChunksScoreTheFirstWindows) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const PerplexityResult all = perplexity(decoder(), windows(), 2048);
  const PerplexityResult two = perplexity(decoder(), windows(kCtx, 2), 2048);
  EXPECT_EQ(two.num_windows, 2);
  EXPECT_EQ(two.count, 2 * (kCtx - 1 - kCtx / 2));
  EXPECT_DOUBLE_EQ(two.running_ppl[1], all.running_ppl[1]);
  EXPECT_DOUBLE_EQ(two.ppl, all.running_ppl[1]);
}

TEST_F(Perplexity, RefusesShortTextsAndBadSizes) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const Tokenizer& tok = *model().tokenizer;
  const std::string text = story_text(10);
  const int64_t n = static_cast<int64_t>(tok.encode(text).size());
  // Exactly two windows' worth is enough; one token less is not.
  EXPECT_EQ(tokenize_eval_windows(tok, text, n / 2).num_windows(), 2);
  try {
    tokenize_eval_windows(tok, text, n / 2 + 1);
    FAIL() << "a text of fewer than 2 * ctx tokens was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs at least " + std::to_string(2 * (n / 2 + 1))),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tokenize_eval_windows(tok, text, 7), Error);
  EXPECT_THROW(make_eval_windows(std::vector<int32_t>(100, 3), -1, 0), Error);
  EXPECT_THROW(perplexity(decoder(), windows(), 0), Error);
  // Longer than the model's context (2048).
  const EvalWindows long_windows = make_eval_windows(std::vector<int32_t>(2 * 4096, 3), 1, 4096);
  EXPECT_THROW(perplexity(decoder(), long_windows, 4096), Error);
}

}  // namespace
}  // namespace tern
