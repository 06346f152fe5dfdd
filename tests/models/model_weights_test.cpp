// Loading weights: GGUF in place, Hugging Face safetensors folders, dummy weights of real
// shapes, save_gguf round trips, and errors that name the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "fixtures.h"
#include "models/model_test_util.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/engine/sequence_runner.h"
#include "tern/formats/gguf.h"
#include "tern/formats/safetensors.h"
#include "tern/models/decoder.h"
#include "tern/models/gguf_export.h"
#include "tern/models/model_loader.h"
#include "tern/models/weight_loader.h"
#include "tern/sampling/sampler.h"

namespace tern {
namespace {

using testing::fixture;

const std::vector<int32_t> kTokens = {1, 17, 42, 99, 5, 300, 21, 8};

std::vector<float> logits_of(const ModelConfig& c, const ModelWeights& w,
                             const std::vector<int32_t>& tokens = kTokens) {
  Decoder decoder(c, w, find_device("cpu"));
  SequenceRunner runner(decoder, static_cast<int64_t>(tokens.size()) + 4);
  std::span<const float> l = runner.feed(tokens, true);
  std::vector<float> out(l.begin(), l.end());
  // Two decode steps too, so the KV cache path is part of what is compared.
  for (int32_t t : {3, 77}) {
    l = runner.feed(t);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

void expect_weights_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message: " << e.what() << "\nwanted: " << p;
  }
}

TEST(ModelWeights, GgufIsUsedInPlace) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  GgufFile g = GgufFile::open(fixture("stories260K/stories260K.gguf"));
  const ModelConfig c = ModelConfig::from_gguf(g);
  const ModelWeights w = load_gguf_weights(g, c);
  ASSERT_EQ(w.layers.size(), 5u);
  EXPECT_EQ(w.layers[2].wq.data, g.find_tensor("blk.2.attn_q.weight")->data);
  EXPECT_EQ(w.layers[4].w_down.rows, 64);
  EXPECT_EQ(w.layers[4].w_down.cols, 172);
  EXPECT_EQ(w.layers[0].attn_norm.data(),
            reinterpret_cast<const float*>(g.find_tensor("blk.0.attn_norm.weight")->data));
  EXPECT_FALSE(w.tied_embeddings);
  EXPECT_EQ(w.rope_layout, RopeLayout::Interleaved);
  EXPECT_TRUE(w.rope_freq_factors.empty());
}

TEST(ModelWeights, ShapeErrorsNameTheTensor) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  GgufFile g = GgufFile::open(fixture("stories260K/stories260K.gguf"));
  ModelConfig c = ModelConfig::from_gguf(g);
  c.intermediate_size = 128;
  expect_weights_error(
      [&] { load_gguf_weights(g, c); },
      {"stories260K.gguf", "'blk.0.ffn_gate.weight'", "[172, 64]", "expected [128, 64]"});
  c = ModelConfig::from_gguf(g);
  c.qk_norm = true;
  expect_weights_error([&] { load_gguf_weights(g, c); }, {"'blk.0.attn_q_norm.weight' is missing"});
}

TEST(ModelWeights, RowsThatAreNotWholeBlocksFallBackLikeLlamaCpp) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  GgufFile g = GgufFile::open(fixture("stories260K/stories260K.gguf"));
  const ModelConfig c = ModelConfig::from_gguf(g);
  const ModelWeights k = make_dummy_weights(c, DType::Q4_K);
  EXPECT_EQ(k.layers[0].wq.dtype, DType::Q5_0);     // 64-wide rows: not 256
  EXPECT_EQ(k.layers[0].w_down.dtype, DType::F16);  // 172-wide rows: not even 32
  const ModelWeights q = quantize_weights(load_gguf_weights(g, c), DType::Q8_0);
  EXPECT_EQ(q.layers[0].w_gate.dtype, DType::Q8_0);
  EXPECT_EQ(q.layers[0].w_down.dtype, DType::F16);
  // Q2_K, Q3_K and IQ4_XS fall back to IQ4_NL, as llama-quantize's.
  EXPECT_EQ(make_dummy_weights(c, DType::Q3_K).layers[0].wq.dtype, DType::IQ4_NL);
  EXPECT_EQ(make_dummy_weights(c, DType::IQ4_XS).layers[0].wq.dtype, DType::IQ4_NL);
  expect_weights_error([&] { make_dummy_weights(c, DType::Q8_K); },
                       {"Q8_K", "not one tern quantizes to"});
}

const nlohmann::json kSmallQwen3 = testing::tiny_qwen3_overrides(2);

TEST(ModelWeights, HuggingFaceFolderMatchesTheSameWeightsInMemory) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  std::ifstream in(fixture("model-configs/qwen3-0.6b/config.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  for (auto it = kSmallQwen3.begin(); it != kSmallQwen3.end(); ++it) j[it.key()] = it.value();
  const ModelConfig c = ModelConfig::from_hf_json(j.dump(), "small qwen3");
  const ModelWeights dummy = make_dummy_weights(c, DType::F32, 11);
  for (DType type : {DType::F32, DType::BF16}) {
    testing::TempDir dir("hf-weights");
    testing::write_hf_folder(dir, j, c, dummy, type);
    LoadOptions opt;
    opt.model = dir.path().string();
    LoadedModel m = load_model(opt);
    EXPECT_EQ(m.weights.rope_layout, RopeLayout::Neox);
    EXPECT_EQ(m.weights.layers[1].wq.dtype, type);
    EXPECT_FALSE(m.tokenizer.has_value());
    // BF16 from the file and BF16 made by quantize_weights are the same bits, so the logits are.
    const ModelWeights same = quantize_weights(dummy, type);
    EXPECT_TRUE(testing::bitwise_equal(logits_of(m.config, m.weights), logits_of(c, same)))
        << dtype_name(type);
  }
}

TEST(ModelWeights, SaveGgufRoundTripsStories260KWithItsTokenizer) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LoadOptions opt;
  opt.model = fixture("stories260K/stories260K.gguf");
  opt.weight_recipe = QuantRecipe::uniform(DType::Q8_0);
  LoadedModel m = load_model(opt);
  testing::TempDir dir("save-gguf");
  save_gguf(dir.file("s.gguf"), m.weights, m.config, &*m.tokenizer, "stories260K");
  GgufFile g = GgufFile::open(dir.file("s.gguf"));
  EXPECT_EQ(g.get_int("general.file_type"), 7);
  EXPECT_EQ(g.get_int("llama.block_count"), 5);
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(g.find_tensor("blk.0.attn_q.weight")->dtype, DType::Q8_0);
  opt.model = dir.file("s.gguf");
  opt.weight_recipe.reset();
  LoadedModel back = load_model(opt);
  EXPECT_EQ(back.config.num_kv_heads, 4);
  // Interleaved already: nothing permuted, the same bits.
  EXPECT_TRUE(
      testing::bitwise_equal(logits_of(back.config, back.weights), logits_of(m.config, m.weights)));
  const std::string text = "Once upon a time, Lily saw a big red ball.";
  EXPECT_EQ(back.tokenizer->encode(text), m.tokenizer->encode(text));
}

// A dummy model of a real architecture's shapes (fewer layers, smaller vocabulary) runs end
// to end, and survives save_gguf + reload (q/k permuted for llama, rope_freqs for llama3).
void run_dummy_end_to_end(const std::string& config_dir, const nlohmann::json& shrink, DType type,
                          bool expect_rope_freqs) {
  TERN_REQUIRE_FIXTURE(config_dir + "/config.json");
  const ModelConfig c = testing::shrunk_config(config_dir, shrink);
  const ModelWeights w = make_dummy_weights(c, type, 5);
  EXPECT_EQ(w.layers[0].w_up.dtype, type);
  const std::vector<float> logits = logits_of(c, w);
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  // The same seed gives the same weights.
  EXPECT_TRUE(testing::bitwise_equal(logits, logits_of(c, make_dummy_weights(c, type, 5))));

  testing::TempDir dir("dummy-gguf");
  save_gguf(dir.file("d.gguf"), w, c, nullptr);
  GgufFile g = GgufFile::open(dir.file("d.gguf"));
  EXPECT_EQ(g.find_tensor("rope_freqs.weight") != nullptr, expect_rope_freqs);
  const ModelConfig c2 = ModelConfig::from_gguf(g);
  const ModelWeights w2 = load_gguf_weights(g, c2);
  EXPECT_EQ(c2.num_heads, c.num_heads);
  EXPECT_EQ(c2.head_dim, c.head_dim);
  EXPECT_EQ(c2.qk_norm, c.qk_norm);
  const std::vector<float> back = logits_of(c2, w2);
  // Same weights; llama's reload rotates interleaved pairs of permuted rows (and llama3 takes
  // its scaling from rope_freqs), which changes summation orders only.
  EXPECT_LT(testing::relative_rms_error(back, logits), 1e-4);
}

TEST(ModelWeights, DummyQwen3ShapesEndToEnd) {
  run_dummy_end_to_end("model-configs/qwen3-0.6b", {{"num_hidden_layers", 1}, {"vocab_size", 1024}},
                       DType::Q8_0, false);
}

TEST(ModelWeights, DummyLlama3ShapesEndToEnd) {
  run_dummy_end_to_end(
      "model-configs/llama-3.2-1b",
      {{"num_hidden_layers", 1}, {"vocab_size", 1024}, {"intermediate_size", 2048}}, DType::Q4_0,
      true);
}

// llama.cpp's Q4_K_M mixture on a shrunk Qwen3 (8 layers: use_more_bits gives layers 0, 3, 6
// and 7 Q6_K attn_v and ffn_down): it runs, and save_gguf writes the per-tensor types and
// general.file_type 15 that llama.cpp names "Q4_K - Medium".
TEST(ModelWeights, DummyQ4_K_M_RunsAndSavesItsMixture) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c =
      testing::shrunk_config("model-configs/qwen3-0.6b", {{"num_hidden_layers", 8},
                                                          {"vocab_size", 1024},
                                                          {"hidden_size", 256},
                                                          {"intermediate_size", 512},
                                                          {"num_attention_heads", 2},
                                                          {"num_key_value_heads", 1}});
  const ModelWeights w = make_dummy_weights(c, QuantRecipe::mixture(FileType::Q4_K_M), 5);
  const std::set<size_t> more_bits = {0, 3, 6, 7};
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const DType up = more_bits.contains(i) ? DType::Q6_K : DType::Q4_K;
    EXPECT_EQ(w.layers[i].wv.dtype, up) << i;
    EXPECT_EQ(w.layers[i].w_down.dtype, up) << i;
    EXPECT_EQ(w.layers[i].wq.dtype, DType::Q4_K) << i;
  }
  EXPECT_EQ(w.token_embedding.dtype, DType::Q6_K);
  const std::vector<float> logits = logits_of(c, w);
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  // The same seed draws the same f32 values whatever the types, so against them the mixture
  // errs less than all-Q4_K and more than all-Q6_K.
  const std::vector<float> f32 = logits_of(c, make_dummy_weights(c, DType::F32, 5));
  const double error = testing::relative_rms_error(logits, f32);
  EXPECT_LT(error,
            testing::relative_rms_error(logits_of(c, make_dummy_weights(c, DType::Q4_K, 5)), f32));
  EXPECT_GT(error,
            testing::relative_rms_error(logits_of(c, make_dummy_weights(c, DType::Q6_K, 5)), f32));

  testing::TempDir dir("q4km-gguf");
  save_gguf(dir.file("m.gguf"), w, c, nullptr);
  GgufFile g = GgufFile::open(dir.file("m.gguf"));
  EXPECT_EQ(g.get_int("general.file_type"), 15);
  EXPECT_EQ(g.get_int("general.quantization_version"), 2);
  EXPECT_EQ(g.find_tensor("token_embd.weight")->dtype, DType::Q6_K);
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(g.find_tensor("output_norm.weight")->dtype, DType::F32);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const DType up = more_bits.contains(static_cast<size_t>(i)) ? DType::Q6_K : DType::Q4_K;
    EXPECT_EQ(g.find_tensor(gguf_tensor_name(i, "attn_v.weight"))->dtype, up) << i;
    EXPECT_EQ(g.find_tensor(gguf_tensor_name(i, "ffn_down.weight"))->dtype, up) << i;
    for (const char* t : {"attn_q.weight", "attn_k.weight", "attn_output.weight", "ffn_gate.weight",
                          "ffn_up.weight"})
      EXPECT_EQ(g.find_tensor(gguf_tensor_name(i, t))->dtype, DType::Q4_K) << i << " " << t;
    EXPECT_EQ(g.find_tensor(gguf_tensor_name(i, "attn_q_norm.weight"))->dtype, DType::F32);
  }
  // Read back: the same logits, and the file type travels so a second save names it again.
  const ModelWeights back = load_gguf_weights(g, ModelConfig::from_gguf(g));
  EXPECT_EQ(back.file_type, FileType::Q4_K_M);
  EXPECT_TRUE(testing::bitwise_equal(logits_of(c, back), logits));
}

// --weight-type q4_k_m on real weights requantizes them with the mixture, and says so.
TEST(ModelWeights, LoadModelRequantizesToAMixture) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LoadOptions opt;
  opt.model = fixture("stories260K/stories260K.gguf");
  opt.weight_recipe = parse_weight_recipe("q4_k_m");
  const LoadedModel m = load_model(opt);
  EXPECT_NE(m.description.find("Q4_K_M"), std::string::npos) << m.description;
  EXPECT_EQ(m.weights.file_type, FileType::Q4_K_M);
  // stories260K's 64-wide rows fit no K type: Q4_K falls back to Q5_0, Q6_K to Q8_0 (5 layers:
  // use_more_bits picks 2 and 4).
  EXPECT_EQ(m.weights.layers[0].wv.dtype, DType::Q5_0);
  EXPECT_EQ(m.weights.layers[2].wv.dtype, DType::Q8_0);
}

// --dtype converts the float matrices only: a quantized matrix keeps its type and its bytes in
// the file, and a float file's type follows the conversion.
TEST(ModelWeights, ConvertFloatMatricesLeavesQuantizedOnes) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  GgufFile g = GgufFile::open(fixture("stories260K/stories260K.gguf"));
  const ModelConfig c = ModelConfig::from_gguf(g);
  ModelWeights q4 = quantize_weights(load_gguf_weights(g, c), DType::Q4_0);
  const std::byte* wq = q4.layers[0].wq.data;
  convert_float_matrices(q4, DType::BF16);
  EXPECT_EQ(q4.layers[0].wq.dtype, DType::Q4_0);
  EXPECT_EQ(q4.layers[0].wq.data, wq);
  EXPECT_EQ(q4.layers[0].w_down.dtype, DType::BF16);  // 172-wide: Q4_0 fell back to F16
  EXPECT_EQ(q4.token_embedding.dtype, DType::Q4_0);
  EXPECT_EQ(q4.file_type, FileType::Q4_0);

  ModelWeights f32 = load_gguf_weights(g, c);
  f32.file_type = FileType::AllF32;
  convert_float_matrices(f32, DType::F16);
  EXPECT_EQ(f32.layers[4].wo.dtype, DType::F16);
  EXPECT_EQ(f32.token_embedding.dtype, DType::F16);
  EXPECT_EQ(f32.lm_head.dtype, DType::F16);
  EXPECT_EQ(f32.file_type, FileType::MostlyF16);
  EXPECT_THROW(convert_float_matrices(f32, DType::Q8_0), Error);
}

TEST(ModelWeights, Qwen2BiasesAreAddedAndRoundTripThroughGguf) {
  const nlohmann::json j = {{"architectures", {"Qwen2ForCausalLM"}},
                            {"model_type", "qwen2"},
                            {"vocab_size", 512},
                            {"hidden_size", 128},
                            {"intermediate_size", 256},
                            {"num_hidden_layers", 2},
                            {"num_attention_heads", 4},
                            {"num_key_value_heads", 2},
                            {"max_position_embeddings", 256},
                            {"rms_norm_eps", 1e-6},
                            {"rope_theta", 1000000.0},
                            {"tie_word_embeddings", true}};
  const ModelConfig c = ModelConfig::from_hf_json(j.dump(), "qwen2 config");
  ASSERT_TRUE(c.attention_bias);
  ModelWeights w = make_dummy_weights(c, DType::Q8_0, 9);
  ASSERT_EQ(w.layers[1].bk.size(), static_cast<size_t>(c.kv_dim()));
  const std::vector<float> zero_bias = logits_of(c, w);
  for (LayerWeights& l : w.layers) {
    for (std::span<const float>* b : {&l.bq, &l.bk, &l.bv}) {
      std::span<float> v = w.own_floats(b->size());
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
      *b = v;
    }
  }
  const std::vector<float> with_bias = logits_of(c, w);
  EXPECT_GT(testing::relative_rms_error(with_bias, zero_bias), 1e-3);

  testing::TempDir dir("qwen2-gguf");
  save_gguf(dir.file("q.gguf"), w, c, nullptr);
  GgufFile g = GgufFile::open(dir.file("q.gguf"));
  EXPECT_NE(g.find_tensor("blk.1.attn_v.bias"), nullptr);
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);  // tied
  const ModelConfig c2 = ModelConfig::from_gguf(g);
  EXPECT_TRUE(c2.attention_bias);
  const ModelWeights w2 = load_gguf_weights(g, c2);
  EXPECT_EQ(w2.rope_layout, RopeLayout::Neox);
  EXPECT_TRUE(testing::bitwise_equal(logits_of(c2, w2), with_bias));
}

}  // namespace
}  // namespace tern
