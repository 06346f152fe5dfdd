// kl_divergence(): stories260K against itself (exactly 0, from any batch size) and against its
// Q4_0 requantization (checked position by position against the test's own computation), and
// the base file's refusals.
#include "tern/eval/kl_divergence.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/engine_test_util.h"
#include "eval/eval_test_util.h"
#include "models/model_test_util.h"
#include "tern/core/error.h"
#include "tern/eval/perplexity.h"

namespace tern {
namespace {

using testing::base_file_bytes;
using testing::story_text;

constexpr int64_t kKlCtx = 64;

// The message of the tern::Error `f` throws ("" if none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class KlDivergence : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(testing::fixture("stories260K/stories260K.gguf"))) return;
    base_model_ = testing::stories260k();
    base_decoder_.emplace(base_model_->config, base_model_->weights, find_device("cpu"));
    windows_ = tokenize_eval_windows(*base_model_->tokenizer, story_text(120), kKlCtx);
    KldBaseWriter writer(dir_.file("base.kld"), windows_, base_model_->config.vocab_size);
    base_ppl_ = perplexity(*base_decoder_, windows_, 2048, KvDtype::F16, &writer);
    writer.finish();
  }
  std::string base_path() const { return dir_.file("base.kld"); }

  testing::TempDir dir_{"kld"};
  std::optional<LoadedModel> base_model_;
  std::optional<Decoder> base_decoder_;
  EvalWindows windows_;
  PerplexityResult base_ppl_;
};

TEST_F(KlDivergence, BaseFileHoldsTheWindowsAndExactLogProbs) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const KldBaseFile base = KldBaseFile::open(base_path());
  EXPECT_EQ(base.vocab_size(), 512);
  EXPECT_EQ(base.windows().ctx, kKlCtx);
  EXPECT_EQ(base.windows().bos, 1);
  EXPECT_EQ(base.windows().tokens, windows_.tokens);
  // Window 1, scored position 5: the base model's own log-softmax of that position's logits.
  SequenceRunner runner(*base_decoder_, kKlCtx);
  std::vector<int32_t> prefix(windows_.window(1).begin(),
                              windows_.window(1).begin() + windows_.first_scored() + 6);
  prefix[0] = 1;
  std::span<const float> logits = runner.feed(prefix);
  double max = logits[0], sum = 0.0;
  for (float v : logits) max = std::max<double>(max, v);
  for (float v : logits) sum += std::exp(v - max);
  std::span<const float> row = base.log_probs(1, 5);
  for (size_t i = 0; i < row.size(); ++i)
    ASSERT_NEAR(row[i], logits[i] - max - std::log(sum), 1e-5) << "token " << i;
}

TEST_F(KlDivergence, OfModelAgainstItselfIsZero) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const KldBaseFile base = KldBaseFile::open(base_path());
  for (int64_t batch : {int64_t{2048}, kKlCtx, int64_t{24}}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const KlDivergenceResult r = kl_divergence(*base_decoder_, base, batch);
    ASSERT_EQ(r.count, windows_.num_scored());
    EXPECT_GE(r.count, 100);  // llama.cpp's minimum for its statistics
    for (size_t i = 0; i < r.kld_values.size(); ++i) {
      ASSERT_EQ(r.kld_values[i], 0.0) << "position " << i;
      ASSERT_EQ(r.p_diff_values[i], 0.0) << "position " << i;
    }
    EXPECT_EQ(r.kld.value, 0.0);
    EXPECT_EQ(r.kld_maximum, 0.0);
    EXPECT_EQ(r.same_top_count, r.count);
    EXPECT_EQ(r.same_top.value, 1.0);
    EXPECT_EQ(r.rms_p_diff.value, 0.0);
    EXPECT_DOUBLE_EQ(r.ppl_q.value, r.ppl_base.value);
    EXPECT_NEAR(r.ppl_base.value, base_ppl_.ppl, 1e-12 * base_ppl_.ppl);
    EXPECT_EQ(r.log_ppl_ratio.value, 0.0);
    EXPECT_NEAR(r.log_ppl_correlation, 1.0, 1e-9);
  }
}

TEST_F(KlDivergence, OfQ4_0RequantizationMatchesOwnComputation) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const KldBaseFile base = KldBaseFile::open(base_path());
  const ModelWeights q4 = quantize_weights(base_model_->weights, DType::Q4_0);
  Decoder q_decoder(base_model_->config, q4, find_device("cpu"));
  const KlDivergenceResult r = kl_divergence(q_decoder, base, 2048);
  EXPECT_GT(r.kld.value, 1e-3);
  EXPECT_GT(r.kld.uncertainty, 0.0);
  EXPECT_LT(r.same_top.value, 1.0);
  EXPECT_GT(r.same_top.value, 0.3);  // a damaged model, not an unrelated one
  EXPECT_NE(r.ppl_q.value, r.ppl_base.value);
  EXPECT_NEAR(r.ppl_base.value, base_ppl_.ppl, 1e-12 * base_ppl_.ppl);
  EXPECT_GE(r.kld_minimum, -1e-6);  // a divergence is never negative (beyond f32 rounding)
  EXPECT_LE(r.kld_minimum, r.kld_median);
  EXPECT_LE(r.kld_median, r.kld_maximum);
  ASSERT_EQ(r.kld_percentiles.size(), 8u);
  EXPECT_DOUBLE_EQ(r.kld_percentiles[0].fraction, 0.999);
  ASSERT_EQ(r.p_diff_percentiles.size(), 10u);
  EXPECT_LE(r.p_diff_minimum, r.p_diff_median);

  // A few positions by the test's own arithmetic: the Q4_0 model token by token, its
  // log-softmax in double, against the base file's row.
  const int64_t scored = windows_.scored_per_window();
  SequenceRunner runner(q_decoder, kKlCtx);
  for (auto [w, k] :
       {std::pair<int64_t, int64_t>{0, 0}, {2, 17}, {windows_.num_windows() - 1, scored - 1}}) {
    SCOPED_TRACE("window " + std::to_string(w) + ", position " + std::to_string(k));
    runner.reset();
    std::vector<int32_t> prefix(windows_.window(w).begin(),
                                windows_.window(w).begin() + windows_.first_scored() + k + 1);
    prefix[0] = 1;
    std::span<const float> logits = runner.feed(prefix);
    double max = logits[0], sum = 0.0;
    for (float v : logits) max = std::max<double>(max, v);
    for (float v : logits) sum += std::exp(v - max);
    const double lse = max + std::log(sum);
    std::span<const float> lb = base.log_probs(w, k);
    double kld = 0.0;
    size_t top_q = 0, top_b = 0;
    for (size_t i = 0; i < lb.size(); ++i) {
      kld += std::exp(static_cast<double>(lb[i])) * (lb[i] - (logits[i] - lse));
      if (logits[i] > logits[top_q]) top_q = i;
      if (lb[i] > lb[top_b]) top_b = i;
    }
    const int32_t next = windows_.target(w, k);
    const double p_diff = std::exp(logits[next] - lse) - std::exp(static_cast<double>(lb[next]));
    const size_t at = static_cast<size_t>(w * scored + k);
    EXPECT_NEAR(r.kld_values[at], kld, 1e-6 + 1e-5 * kld);
    EXPECT_NEAR(r.p_diff_values[at], p_diff, 1e-6);
    EXPECT_EQ(r.same_top_values[at], top_q == top_b ? 1 : 0);
  }
  int64_t same = 0;
  for (uint8_t v : r.same_top_values) same += v;
  EXPECT_EQ(same, r.same_top_count);
  EXPECT_DOUBLE_EQ(r.same_top.value, static_cast<double>(same) / static_cast<double>(r.count));
}

TEST_F(KlDivergence, LimitedToChunks) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const KldBaseFile base = KldBaseFile::open(base_path());
  const KlDivergenceResult r = kl_divergence(*base_decoder_, base, 2048, KvDtype::F16, 3);
  EXPECT_EQ(r.num_windows, 3);
  EXPECT_EQ(r.count, 3 * windows_.scored_per_window());
}

TEST_F(KlDivergence, RefusesAVocabularyMismatch) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  // A well-formed file of a 600-token vocabulary (uniform rows).
  std::vector<int32_t> tokens(2 * kKlCtx, 5);
  auto bytes = base_file_bytes(600, kKlCtx, 2, 1, tokens, -std::log(600.0f));
  const KldBaseFile base(std::make_shared<const MappedFile>("other.kld", bytes));
  const std::string msg = error_of([&] { kl_divergence(*base_decoder_, base, 2048); });
  EXPECT_NE(msg.find("other.kld"), std::string::npos) << msg;
  EXPECT_NE(msg.find("600"), std::string::npos) << msg;
  EXPECT_NE(msg.find("512"), std::string::npos) << msg;
}

TEST_F(KlDivergence, RefusesRowsThatAreNotDistributions) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  std::vector<int32_t> tokens(2 * kKlCtx, 5);
  for (float fill : {0.0f, NAN, 1.0f}) {  // Σp = 512; NaN; log p > 0
    auto bytes = base_file_bytes(512, kKlCtx, 2, 1, tokens, fill);
    const KldBaseFile base(std::make_shared<const MappedFile>("bad-rows.kld", bytes));
    const std::string msg = error_of([&] { kl_divergence(*base_decoder_, base, 2048); });
    EXPECT_NE(msg.find("bad-rows.kld: the log-probabilities of window 1"), std::string::npos)
        << msg;
  }
}

TEST(KlDivergenceBaseFile, RefusesMalformedFiles) {
  const std::vector<int32_t> tokens(2 * 16, 3);
  const std::vector<std::byte> good = base_file_bytes(32, 16, 2, 1, tokens, -std::log(32.0f));
  auto parse = [](std::vector<std::byte> bytes) {
    return error_of(
        [&] { KldBaseFile(std::make_shared<const MappedFile>("b.kld", std::move(bytes))); });
  };
  EXPECT_EQ(parse(good), "");
  {
    const KldBaseFile f(std::make_shared<const MappedFile>("b.kld", good));
    EXPECT_EQ(f.windows().num_windows(), 2);
    EXPECT_EQ(f.windows().scored_per_window(), 7);
    EXPECT_FLOAT_EQ(f.log_probs(1, 6)[31], -std::log(32.0f));
  }
  auto expect_refused = [&](std::vector<std::byte> bytes, const std::string& words) {
    const std::string msg = parse(std::move(bytes));
    EXPECT_EQ(msg.rfind("b.kld: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(words), std::string::npos) << msg;
  };
  // Truncated anywhere: inside the header, the tokens, the rows.
  for (size_t keep : {size_t{0}, size_t{7}, size_t{27}, size_t{60}, good.size() - 1})
    expect_refused(std::vector<std::byte>(good.begin(), good.begin() + static_cast<long>(keep)),
                   keep < kKldBaseHeaderBytes ? "too short" : "truncated");
  auto with_trailing = good;
  with_trailing.push_back(std::byte{0});
  expect_refused(with_trailing, "1 bytes after the last");
  auto bad_magic = good;
  bad_magic[0] = std::byte{'_'};
  expect_refused(bad_magic, "not a tern KL-divergence base file");
  auto set_u32 = [&](size_t offset, uint32_t v) {
    auto b = good;
    std::memcpy(b.data() + offset, &v, 4);
    return b;
  };
  expect_refused(set_u32(8, 2), "version 2");
  expect_refused(set_u32(12, 0), "vocabulary size 0");
  expect_refused(set_u32(12, 33), "truncated");  // more rows than there are
  expect_refused(set_u32(16, 7), "context 7");
  expect_refused(set_u32(20, 0), "window count 0");
  expect_refused(set_u32(20, 0xFFFFFFFFu), "window count");
  expect_refused(set_u32(12, 0x7FFFFFFFu), "truncated");  // huge, but no overflow
  expect_refused(set_u32(24, 32), "BOS id 32");
  expect_refused(set_u32(24, static_cast<uint32_t>(-2)), "BOS id -2");
  expect_refused(set_u32(kKldBaseHeaderBytes + 4 * 9, 32), "token 9 (id 32)");
  expect_refused(set_u32(kKldBaseHeaderBytes + 4 * 3, static_cast<uint32_t>(-1)),
                 "token 3 (id -1)");
}

TEST(KlDivergenceBaseFile, WriterRoundTrip) {
  testing::TempDir dir("kld-round-trip");
  std::vector<int32_t> tokens(2 * 16);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 32);
  const EvalWindows w = make_eval_windows(tokens, /*bos=*/-1, 16);
  KldBaseWriter writer(dir.file("r.kld"), w, 32);
  for (int window = 0; window < 2; ++window) {
    std::vector<float> rows(7 * 32, -std::log(32.0f));
    rows[5 * 32 + 3] = static_cast<float>(window) - 10.0f;  // marks window, position 5, token 3
    writer.write_window(rows);
  }
  writer.finish();
  const KldBaseFile f = KldBaseFile::open(dir.file("r.kld"));
  EXPECT_EQ(f.windows().bos, -1);
  EXPECT_EQ(f.windows().tokens, tokens);
  EXPECT_EQ(f.vocab_size(), 32);
  EXPECT_EQ(f.log_probs(0, 5)[3], -10.0f);
  EXPECT_EQ(f.log_probs(1, 5)[3], -9.0f);
  EXPECT_EQ(f.log_probs(1, 5)[4], -std::log(32.0f));
}

TEST(KlDivergenceBaseFile, WriterRefusesWrongWindowSizesAndMissingWindows) {
  testing::TempDir dir("kld-writer");
  const EvalWindows w = make_eval_windows(std::vector<int32_t>(2 * 16, 3), 1, 16);
  KldBaseWriter writer(dir.file("w.kld"), w, 32);
  EXPECT_THROW(writer.write_window(std::vector<float>(5)), Error);
  writer.write_window(std::vector<float>(7 * 32, -std::log(32.0f)));
  EXPECT_NE(error_of([&] { writer.finish(); }).find("1 windows were never written"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              KldBaseWriter("/nonexistent-dir/x.kld",
                            EvalWindows{16, 1, std::vector<int32_t>(32, 3)}, 32);
            }).find("/nonexistent-dir/x.kld"),
            std::string::npos);
}

}  // namespace
}  // namespace tern
