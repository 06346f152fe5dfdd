// The decoder against references: stories260K's 255 greedy ids from BOS (float64 reference),
// llama-2-tiny-random's first logits, quantized weights against F32, and batch invariance.
#include "tern/models/decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>

#include "fixtures.h"
#include "models/model_test_util.h"
#include "tern/engine/sequence_runner.h"
#include "tern/formats/gguf.h"
#include "tern/models/weight_loader.h"
#include "tern/sampling/sampler.h"

namespace tern {
namespace {

using testing::fixture;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

struct GgufModel {
  explicit GgufModel(const std::string& path)
      : gguf(GgufFile::open(path)),
        config(ModelConfig::from_gguf(gguf)),
        weights(load_gguf_weights(gguf, config)) {}
  GgufFile gguf;
  ModelConfig config;
  ModelWeights weights;
};

// Greedy ids after `prompt`, `steps` of them.
std::vector<int32_t> greedy(Decoder& decoder, const std::vector<int32_t>& prompt, int steps) {
  SequenceRunner runner(decoder, static_cast<int64_t>(prompt.size()) + steps);
  std::vector<int32_t> out;
  std::span<const float> logits = runner.feed(prompt);
  for (int i = 0; i < steps; ++i) {
    out.push_back(argmax(logits));
    if (i + 1 < steps) logits = runner.feed(out.back());
  }
  return out;
}

TEST(Decoder, Stories260KGreedyFromBosMatchesReference) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const nlohmann::json ref = read_json(fixture("stories260K/reference_greedy_from_bos.json"));
  GgufModel m(fixture("stories260K/stories260K.gguf"));
  EXPECT_EQ(m.weights.rope_layout, RopeLayout::Interleaved);
  Decoder decoder(m.config, m.weights, find_device("cpu"));

  // First step: the top-5 logits of the float64 reference, to 1e-3.
  SequenceRunner runner(decoder, 8);
  std::span<const float> logits = runner.feed(ref["prompt_ids"].get<std::vector<int32_t>>());
  for (const auto& pair : ref["top5_logits_after_prompt"]) {
    const int id = pair[0].get<int>();
    EXPECT_NEAR(logits[static_cast<size_t>(id)], pair[1].get<double>(), 1e-3) << "token " << id;
  }
  const std::vector<int32_t> want = ref["greedy_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(want.size(), 255u);
  EXPECT_EQ(greedy(decoder, ref["prompt_ids"].get<std::vector<int32_t>>(), 255), want);
}

TEST(Decoder, LlamaTinyRandomFirstLogitsMatchFloat64Reference) {
  TERN_REQUIRE_FIXTURE("llama-2-tiny-random/llama-2-tiny-random.gguf");
  const nlohmann::json ref =
      read_json(fixture("llama-2-tiny-random/reference_greedy_from_bos.json"));
  GgufModel m(fixture("llama-2-tiny-random/llama-2-tiny-random.gguf"));
  EXPECT_FALSE(m.weights.tied_embeddings);
  EXPECT_EQ(m.weights.lm_head.dtype, DType::F16);
  Decoder decoder(m.config, m.weights, find_device("cpu"));
  SequenceRunner runner(decoder, 4);
  std::span<const float> logits = runner.feed(ref["prompt_ids"].get<std::vector<int32_t>>());
  // F16 matrices take f16-rounded activations (llama.cpp does the same), which moves these
  // ~0.2 logits by up to ~1e-3 against the float64 reference of exactly widened weights.
  constexpr double kTolerance = 2e-3;
  for (const auto& pair : ref["top5_logits_after_prompt"]) {
    const int id = pair[0].get<int>();
    EXPECT_NEAR(logits[static_cast<size_t>(id)], pair[1].get<double>(), kTolerance)
        << "token " << id;
  }
  // The top-1 margin of the first step is 0.0103, wide enough for f16 rounding.
  EXPECT_EQ(argmax(logits), ref["greedy_ids"][0].get<int32_t>());
}

using testing::prefill_logits;

TEST(Decoder, QuantizedStories260KStaysCloseToF32) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  GgufModel m(fixture("stories260K/stories260K.gguf"));
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};
  const std::vector<float> ref = prefill_logits(m.config, m.weights, tokens);
  // Relative RMS error of all 12 × 512 logits against F32; bounds 1.5× what was measured
  // (Q8_0 0.0094, Q4_0 0.133). The 172-wide ffn_down falls back to F16 in both.
  for (auto [type, bound] : {std::pair{DType::Q8_0, 0.015}, std::pair{DType::Q4_0, 0.2}}) {
    const ModelWeights q = quantize_weights(m.weights, type);
    EXPECT_EQ(q.layers[0].wq.dtype, type);
    const std::vector<float> got = prefill_logits(m.config, q, tokens);
    const double err = testing::relative_rms_error(got, ref);
    EXPECT_LT(err, bound) << dtype_name(type);
    EXPECT_GT(err, 0.0) << dtype_name(type) << ": suspiciously exact";
    std::printf("stories260K %s: relative RMS logit error %.5f\n",
                std::string(dtype_name(type)).c_str(), err);
  }
}

TEST(Decoder, QuantizedKTypesStayCloseToF32) {
  // Stories260K's 64-wide rows are not whole 256-element super-blocks: a dummy model is.
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = testing::tiny_qwen3_config(2);
  const ModelWeights f32 = make_dummy_weights(c, DType::F32, 7);
  const std::vector<int32_t> tokens = {1, 5, 9, 200, 33, 7, 480, 2};
  const std::vector<float> ref = prefill_logits(c, f32, tokens);
  // Relative RMS logit error; bounds 1.5× what was measured (Q8_0 0.0135, Q6_K 0.035,
  // Q5_K 0.071, Q4_K 0.137: uniform random weights are harder to quantize than trained ones),
  // and fewer bits must cost more.
  double previous = 0.0;
  for (auto [type, bound] : {std::pair{DType::Q8_0, 0.02}, std::pair{DType::Q6_K, 0.053},
                             std::pair{DType::Q5_K, 0.107}, std::pair{DType::Q4_K, 0.2}}) {
    const std::vector<float> got = prefill_logits(c, quantize_weights(f32, type), tokens);
    const double err = testing::relative_rms_error(got, ref);
    EXPECT_LT(err, bound) << dtype_name(type);
    EXPECT_GT(err, previous) << dtype_name(type);
    previous = err;
    std::printf("dummy qwen3 %s: relative RMS logit error %.5f\n",
                std::string(dtype_name(type)).c_str(), err);
  }
}

TEST(Decoder, BatchInvariantStories260K) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  GgufModel m(fixture("stories260K/stories260K.gguf"));
  testing::expect_batch_invariant(m.config, m.weights);
  testing::expect_batch_invariant(m.config, quantize_weights(m.weights, DType::Q4_0));
}

// Weights packed for the kernels (pack_for_kernels: both AVX-512 levels' Q4_0 and Q8_0, the Amx
// level's Q4_K) give
// the logits of the file's rows bit for bit — a 20-token prefill (the tile path), a 3-token
// step (the few-token path), then decodes (the GEMV) — and stay batch invariant. Rows of 20
// and 22 blocks of 32 (more than one per chain), of 2 and 3 super-blocks for Q4_K.
TEST(Decoder, PackedWeightsGiveTheSameLogits) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  auto config = [](int64_t hidden, int64_t ffn) {
    return testing::shrunk_config("model-configs/qwen3-0.6b", {{"num_hidden_layers", 2},
                                                               {"vocab_size", 520},
                                                               {"hidden_size", hidden},
                                                               {"intermediate_size", ffn},
                                                               {"num_attention_heads", 4},
                                                               {"num_key_value_heads", 2},
                                                               {"head_dim", 64}});
  };
  std::vector<int32_t> prompt(20);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 5) % 520);
  int packed_types = 0;
  for (DType type : {DType::Q4_0, DType::Q8_0, DType::Q4_K}) {
    const ModelConfig c = type == DType::Q4_K ? config(512, 768) : config(640, 704);
    const ModelWeights plain = make_dummy_weights(c, type, 9);
    ModelWeights packed = make_dummy_weights(c, type, 9);
    find_device("cpu").prepare_weights(packed);
    if (packed.layers[0].wq.packed == nullptr) continue;  // this CPU's kernels read it in place
    ++packed_types;
    EXPECT_NE(packed.lm_head.packed, nullptr) << dtype_name(type);
    // Every part is whole groups of 16 rows, so q/k/v and gate/up are stacked.
    EXPECT_NE(packed.layers[0].wqkv_packed.packed, nullptr) << dtype_name(type);
    EXPECT_NE(packed.layers[1].w_gate_up_packed.packed, nullptr) << dtype_name(type);
    auto run = [&](const ModelWeights& w) {
      Decoder decoder(c, w, find_device("cpu"));
      SequenceRunner runner(decoder, 32);
      std::span<const float> logits = runner.feed(prompt, true);
      std::vector<float> all(logits.begin(), logits.end());
      logits = runner.feed(std::vector<int32_t>{11, 12, 13}, true);
      all.insert(all.end(), logits.begin(), logits.end());
      for (int32_t id : {7, 300, 42}) {
        logits = runner.feed(id);
        all.insert(all.end(), logits.begin(), logits.end());
      }
      return all;
    };
    EXPECT_TRUE(testing::bitwise_equal(run(packed), run(plain))) << dtype_name(type);
    testing::expect_batch_invariant(c, packed);
  }
  if (packed_types == 0) GTEST_SKIP() << "this CPU's kernels read every type in place";
}

TEST(Decoder, BatchInvariantDummyQwen3Q4K) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = testing::tiny_qwen3_config(2);
  testing::expect_batch_invariant(c, make_dummy_weights(c, DType::Q4_K, 3));
}

}  // namespace
}  // namespace tern
