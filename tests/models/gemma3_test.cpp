// Gemma 3's files: its Hugging Face checkpoints (norms stored as weight − 1, which
// Gemma3RMSNorm adds back; pre/post feed-forward norms) and llama.cpp's gemma3 GGUF (the norms
// with the 1 added, post_attention_norm and post_ffw_norm, the sliding keys). The forward itself
// is checked against a float64 one in moe_decoder_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/model_test_util.h"
#include "models/tiny_model_configs.h"
#include "tern/core/error.h"
#include "tern/formats/gguf.h"
#include "tern/formats/safetensors.h"
#include "tern/models/gguf_export.h"
#include "tern/models/model_loader.h"

namespace tern {
namespace {

using testing::tiny_gemma3_json;

// Dummy weights whose norms are not ones (testing::pattern_norms).
ModelWeights tiny_gemma_weights(const ModelConfig& c) {
  ModelWeights w = make_dummy_weights(c, DType::F32, 23);
  testing::pattern_norms(w);
  return w;
}

TEST(Gemma3, HuggingFaceNormsAreStoredLessOne) {
  const ModelConfig c = ModelConfig::from_hf_json(tiny_gemma3_json().dump(), "tiny gemma");
  const ModelWeights w = tiny_gemma_weights(c);
  testing::TempDir dir("gemma_hf");
  std::ofstream(dir.file("config.json")) << tiny_gemma3_json().dump();
  SafetensorsWriter st;
  auto matrix = [&](const std::string& name, const WeightMatrix& m) {
    st.add_tensor(name, DType::F32, {m.rows, m.cols},
                  {m.data, static_cast<size_t>(m.rows) * m.row_bytes});
  };
  auto norm = [&](const std::string& name, std::span<const float> v) {
    std::vector<float> less_one(v.begin(), v.end());
    for (float& x : less_one) x -= 1;
    st.add_tensor(name, DType::F32, {static_cast<int64_t>(v.size())},
                  std::as_bytes(std::span<const float>(less_one)));
  };
  matrix("model.embed_tokens.weight", w.token_embedding);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    norm(p + "input_layernorm.weight", l.attn_norm);
    norm(p + "post_attention_layernorm.weight", l.attn_post_norm);
    norm(p + "pre_feedforward_layernorm.weight", l.ffn_norm);
    norm(p + "post_feedforward_layernorm.weight", l.ffn_post_norm);
    norm(p + "self_attn.q_norm.weight", l.q_norm);
    norm(p + "self_attn.k_norm.weight", l.k_norm);
    matrix(p + "self_attn.q_proj.weight", l.wq);
    matrix(p + "self_attn.k_proj.weight", l.wk);
    matrix(p + "self_attn.v_proj.weight", l.wv);
    matrix(p + "self_attn.o_proj.weight", l.wo);
    matrix(p + "mlp.gate_proj.weight", l.w_gate);
    matrix(p + "mlp.up_proj.weight", l.w_up);
    matrix(p + "mlp.down_proj.weight", l.w_down);
  }
  norm("model.norm.weight", w.output_norm);
  st.write(dir.file("model.safetensors"));
  LoadOptions load;
  load.model = dir.path().string();
  const LoadedModel m = load_model(load);
  EXPECT_EQ(m.config.arch, ModelArch::Gemma3);
  const std::vector<int32_t> tokens = {2, 9, 27, 81, 243, 1, 7, 5};
  EXPECT_TRUE(testing::bitwise_equal(testing::prefill_logits(m.config, m.weights, tokens),
                                     testing::prefill_logits(c, w, tokens)));
}

// save_gguf writes llama.cpp's gemma3 (the post norms, the sliding window with pattern 6 and the
// local RoPE base), which loads back to the same logits bit for bit; another sliding pattern,
// or a query scale llama.cpp would not derive, is refused.
TEST(Gemma3, GgufRoundTrip) {
  nlohmann::json j = tiny_gemma3_json();
  j["num_hidden_layers"] = 6;
  j["sliding_window_pattern"] = 6;
  const ModelConfig c = ModelConfig::from_hf_json(j.dump(), "tiny gemma");
  const ModelWeights w = tiny_gemma_weights(c);
  testing::TempDir dir("gemma_gguf");
  const std::string path = dir.file("tiny.gguf");
  save_gguf(path, w, c, nullptr, "tiny");
  const GgufFile g = GgufFile::open(path);
  EXPECT_EQ(g.get_int("gemma3.attention.sliding_window"), 4);
  EXPECT_EQ(g.get_int("gemma3.attention.sliding_window_pattern"), 6);
  EXPECT_EQ(g.get_float("gemma3.rope.freq_base_swa"), 10000.0);
  for (const char* name : {"blk.5.post_attention_norm.weight", "blk.5.post_ffw_norm.weight",
                           "blk.5.ffn_norm.weight", "blk.5.attn_q_norm.weight"})
    EXPECT_NE(g.find_tensor(name), nullptr) << name;
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);  // tied

  const ModelConfig read = ModelConfig::from_gguf(g);
  EXPECT_EQ(read.arch, ModelArch::Gemma3);
  EXPECT_EQ(read.sliding_layers, c.sliding_layers);
  EXPECT_DOUBLE_EQ(read.attention_scale, c.attention_scale);
  EXPECT_EQ(read.rope_local_theta, 10000.0);
  const ModelWeights back = load_gguf_weights(g, read);
  const std::vector<int32_t> tokens = {2, 100, 4, 4, 17, 200, 3, 9};
  EXPECT_TRUE(testing::bitwise_equal(testing::prefill_logits(read, back, tokens),
                                     testing::prefill_logits(c, w, tokens)));

  ModelConfig other = c;
  other.sliding_layers = {true, false, true, false, true, false};
  EXPECT_THROW(save_gguf(dir.file("pattern.gguf"), w, other, nullptr, "tiny"), Error);
  ModelConfig scaled = c;
  scaled.attention_scale = 0.3;
  EXPECT_THROW(save_gguf(dir.file("scale.gguf"), w, scaled, nullptr, "tiny"), Error);
}

}  // namespace
}  // namespace tern
