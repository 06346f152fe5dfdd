// gpt-oss's files: its Hugging Face checkpoints (the experts in OpenAI's MXFP4 tensors or
// unquantized, gate and up interleaved; router, sinks and biases by transformers' names) and
// llama.cpp's gpt-oss GGUF
// (post_attention_norm, attn_sinks, the experts' biases stacked, the sliding-window keys). The
// forward itself is checked against a float64 one in moe_decoder_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/model_test_util.h"
#include "tern/blocks/block_layouts.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/formats/gguf.h"
#include "tern/formats/safetensors.h"
#include "tern/models/checkpoint_export.h"
#include "tern/models/gguf_export.h"
#include "tern/models/model_loader.h"

namespace tern {
namespace {

// A gpt-oss of test size: 2 layers of hidden 64, the first sliding over 4 keys, 4 q and 2 kv
// heads of 16, 4 experts of 64 (two MXFP4 blocks a row), 2 chosen per token, vocabulary 256.
nlohmann::json tiny_json() {
  return {{"architectures", {"GptOssForCausalLM"}},
          {"model_type", "gpt_oss"},
          {"vocab_size", 256},
          {"hidden_size", 64},
          {"intermediate_size", 64},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"num_local_experts", 4},
          {"num_experts_per_tok", 2},
          {"sliding_window", 4},
          {"layer_types", {"sliding_attention", "full_attention"}},
          {"rope_theta", 150000.0},
          {"rms_norm_eps", 1e-5},
          {"tie_word_embeddings", false},
          {"quantization_config", {{"quant_method", "mxfp4"}}}};
}

// Dummy weights with F32 matrices but MXFP4 experts (the published checkpoints' types; F32 ones
// too unless `mxfp4_experts`), and patterned biases and sinks (dummy ones are zeros, which a
// dropped term would not show).
ModelWeights tiny_weights(const ModelConfig& c, bool mxfp4_experts = true) {
  ModelWeights w = make_dummy_weights(c, DType::F32, 21);
  auto pattern = [&](std::span<const float>& v, float scale) {
    std::span<float> out = w.own_floats(v.size());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = scale * (static_cast<float>((i * 5 + 1) % 9) - 4.0f);
    v = out;
  };
  auto mxfp4 = [&](std::vector<WeightMatrix>& experts) {
    const WeightMatrix& first = experts.front();
    const auto n = static_cast<int64_t>(experts.size());
    const size_t row_bytes = *dtype_bytes(DType::MXFP4, static_cast<uint64_t>(first.cols));
    std::span<std::byte> bytes = w.own_bytes(static_cast<size_t>(n * first.rows) * row_bytes);
    for (int64_t e = 0; e < n; ++e)
      for (int64_t r = 0; r < first.rows; ++r)
        quantize_row(
            DType::MXFP4, reinterpret_cast<const float*>(experts[static_cast<size_t>(e)].row(r)),
            bytes.data() + static_cast<size_t>(e * first.rows + r) * row_bytes, first.cols);
    experts = split_experts({DType::MXFP4, n * first.rows, first.cols, bytes.data(), row_bytes}, n);
  };
  for (LayerWeights& l : w.layers) {
    for (std::span<const float>* b : {&l.bq, &l.bk, &l.bv, &l.bo}) pattern(*b, 0.01f);
    pattern(l.attn_sinks, 0.25f);
    pattern(l.moe->router_bias, 0.05f);
    for (std::span<const float>* b : {&l.moe->gate_bias, &l.moe->up_bias, &l.moe->down_bias})
      pattern(*b, 0.02f);
    if (mxfp4_experts)
      for (std::vector<WeightMatrix>* m : {&l.moe->gate, &l.moe->up, &l.moe->down}) mxfp4(*m);
  }
  return w;
}

// OpenAI's MXFP4 pair of `parts` (ggml MXFP4 matrices [rows, cols] each), rows taken in
// `order` per expert: `<name>_blocks` [n, rows, cols / 32, 16], element 2i in byte i's lower
// nibble; `<name>_scales` [n, rows, cols / 32].
void add_openai_mxfp4(SafetensorsWriter& st, const std::string& name,
                      const std::vector<std::pair<const WeightMatrix*, int64_t>>& rows_of_expert,
                      int64_t n) {
  const int64_t rows = static_cast<int64_t>(rows_of_expert.size()) / n;
  const int64_t groups = rows_of_expert.front().first->cols / kQK;
  std::vector<std::byte> blocks, scales;
  for (const auto& [m, r] : rows_of_expert) {
    const auto* b = reinterpret_cast<const BlockMxfp4*>(m->row(r));
    for (int64_t g = 0; g < groups; ++g) {
      scales.push_back(static_cast<std::byte>(b[g].e));
      // ggml: byte j holds elements j (lower) and j + 16 (upper).
      auto code = [&](int i) { return i < 16 ? b[g].qs[i] & 0xF : b[g].qs[i - 16] >> 4; };
      for (int i = 0; i < kQK; i += 2)
        blocks.push_back(static_cast<std::byte>(code(i) | code(i + 1) << 4));
    }
  }
  st.add_tensor(name + "_blocks", DType::U8, {n, rows, groups, kQK / 2}, blocks);
  st.add_tensor(name + "_scales", DType::U8, {n, rows, groups}, scales);
}

void add_f32(SafetensorsWriter& st, const std::string& name, std::vector<int64_t> shape,
             std::span<const float> v) {
  st.add_tensor(name, DType::F32, std::move(shape), std::as_bytes(v));
}

// The BF16 checkpoints' layout of unquantized experts: one tensor [n, cols, rows], inputs first,
// whose output j of expert e is rows_of_expert[e · rows + j] (an F32 matrix and a row of it).
void add_transposed(SafetensorsWriter& st, const std::string& name,
                    const std::vector<std::pair<const WeightMatrix*, int64_t>>& rows_of_expert,
                    int64_t n) {
  const int64_t rows = static_cast<int64_t>(rows_of_expert.size()) / n;
  const int64_t cols = rows_of_expert.front().first->cols;
  std::vector<float> values(static_cast<size_t>(n * cols * rows));
  for (int64_t e = 0; e < n; ++e)
    for (int64_t j = 0; j < rows; ++j) {
      const auto& [m, r] = rows_of_expert[static_cast<size_t>(e * rows + j)];
      const auto* row = reinterpret_cast<const float*>(m->row(r));
      for (int64_t k = 0; k < cols; ++k)
        values[static_cast<size_t>((e * cols + k) * rows + j)] = row[k];
    }
  st.add_tensor(name, DType::F32, {n, cols, rows}, std::as_bytes(std::span<const float>(values)));
}

// transformers' gpt_oss names and layout, as the published checkpoints (F32 where they hold
// BF16, so that the values are exact): the experts in OpenAI's MXFP4 pairs when `w` holds them
// so, else unquantized as the BF16 checkpoints.
void write_hf_folder(const testing::TempDir& dir, const ModelConfig& c, const ModelWeights& w,
                     const nlohmann::json& config_json = tiny_json()) {
  std::ofstream(dir.file("config.json")) << config_json.dump();
  SafetensorsWriter st;
  auto matrix = [&](const std::string& name, const WeightMatrix& m) {
    ASSERT_EQ(m.dtype, DType::F32);
    st.add_tensor(name, DType::F32, {m.rows, m.cols},
                  {m.data, static_cast<size_t>(m.rows) * m.row_bytes});
  };
  auto vec = [&](const std::string& name, std::span<const float> v) {
    add_f32(st, name, {static_cast<int64_t>(v.size())}, v);
  };
  const int64_t n = c.num_experts, ff = c.moe_intermediate_size, h = c.hidden_size;
  matrix("model.embed_tokens.weight", w.token_embedding);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const MixtureOfExperts& moe = *l.moe;
    const std::string p = "model.layers." + std::to_string(i) + ".";
    vec(p + "input_layernorm.weight", l.attn_norm);
    matrix(p + "self_attn.q_proj.weight", l.wq);
    matrix(p + "self_attn.k_proj.weight", l.wk);
    matrix(p + "self_attn.v_proj.weight", l.wv);
    matrix(p + "self_attn.o_proj.weight", l.wo);
    vec(p + "self_attn.q_proj.bias", l.bq);
    vec(p + "self_attn.k_proj.bias", l.bk);
    vec(p + "self_attn.v_proj.bias", l.bv);
    vec(p + "self_attn.o_proj.bias", l.bo);
    vec(p + "self_attn.sinks", l.attn_sinks);
    vec(p + "post_attention_layernorm.weight", l.ffn_norm);
    matrix(p + "mlp.router.weight", moe.router);
    vec(p + "mlp.router.bias", moe.router_bias);
    // gate_up_proj's output 2j is the gate's j, 2j + 1 the up's.
    std::vector<std::pair<const WeightMatrix*, int64_t>> gate_up, down;
    std::vector<float> gate_up_bias;
    for (size_t e = 0; e < moe.gate.size(); ++e) {
      for (int64_t j = 0; j < ff; ++j) {
        gate_up.emplace_back(&moe.gate[e], j);
        gate_up.emplace_back(&moe.up[e], j);
        gate_up_bias.push_back(moe.gate_bias[e * static_cast<size_t>(ff) + j]);
        gate_up_bias.push_back(moe.up_bias[e * static_cast<size_t>(ff) + j]);
      }
      for (int64_t r = 0; r < h; ++r) down.emplace_back(&moe.down[e], r);
    }
    const auto experts = moe.gate[0].dtype == DType::MXFP4 ? add_openai_mxfp4 : add_transposed;
    experts(st, p + "mlp.experts.gate_up_proj", gate_up, n);
    add_f32(st, p + "mlp.experts.gate_up_proj_bias", {n, 2 * ff}, gate_up_bias);
    experts(st, p + "mlp.experts.down_proj", down, n);
    add_f32(st, p + "mlp.experts.down_proj_bias", {n, h}, moe.down_bias);
  }
  vec("model.norm.weight", w.output_norm);
  matrix("lm_head.weight", w.lm_head);
  st.write_sharded(dir.path().string(), 1 << 20);
}

// A BF16 checkpoint's unquantized experts (written F32 here, so the values are exact): gate and
// up interleaved by output in gate_up_proj, each expert inputs first. They load transposed and
// apart, to the same logits bit for bit as the weights written; a tensor of another shape is
// named.
TEST(GptOss, HuggingFaceUnquantizedExpertsLoad) {
  nlohmann::json j = tiny_json();
  j.erase("quantization_config");
  const ModelConfig c = ModelConfig::from_hf_json(j.dump(), "tiny gpt-oss");
  const ModelWeights w = tiny_weights(c, /*mxfp4_experts=*/false);
  testing::TempDir dir("gpt_oss_unquantized");
  write_hf_folder(dir, c, w, j);
  LoadOptions load;
  load.model = dir.path().string();
  const LoadedModel m = load_model(load);
  EXPECT_EQ(m.weights.layers[1].moe->down[3].dtype, DType::F32);
  const std::vector<int32_t> tokens = {3, 9, 27, 81, 243, 1, 2, 5};
  EXPECT_TRUE(testing::bitwise_equal(testing::prefill_logits(m.config, m.weights, tokens),
                                     testing::prefill_logits(c, w, tokens)));
  j["intermediate_size"] = 96;  // the experts on file are 64 wide
  std::ofstream(dir.file("config.json")) << j.dump();
  try {
    load_model(load);
    ADD_FAILURE() << "loaded experts of the wrong width";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mlp.experts.gate_up_proj' is F32 [4, 64, 128], expected"),
              std::string::npos)
        << e.what();
  }
}

TEST(GptOss, HuggingFaceMxfp4CheckpointLoadsItsExpertsExactly) {
  const ModelConfig c = ModelConfig::from_hf_json(tiny_json().dump(), "tiny gpt-oss");
  const ModelWeights w = tiny_weights(c);
  testing::TempDir dir("gpt_oss_hf");
  write_hf_folder(dir, c, w);
  LoadOptions load;
  load.model = dir.path().string();
  const LoadedModel m = load_model(load);
  EXPECT_EQ(m.config.arch, ModelArch::GptOss);
  const MixtureOfExperts& moe = *m.weights.layers[1].moe;
  for (size_t e = 0; e < 4; ++e) {
    for (const auto& [got, want] : {std::pair{&moe.gate[e], &w.layers[1].moe->gate[e]},
                                    {&moe.up[e], &w.layers[1].moe->up[e]},
                                    {&moe.down[e], &w.layers[1].moe->down[e]}}) {
      ASSERT_EQ(got->dtype, DType::MXFP4);
      ASSERT_EQ(got->rows, want->rows);
      EXPECT_EQ(std::memcmp(got->data, want->data, static_cast<size_t>(got->rows) * got->row_bytes),
                0)
          << "expert " << e;
    }
  }
  const std::vector<int32_t> tokens = {3, 9, 27, 81, 243, 1, 2, 5};
  EXPECT_TRUE(testing::bitwise_equal(testing::prefill_logits(m.config, m.weights, tokens),
                                     testing::prefill_logits(c, w, tokens)));
}

// save_gguf writes llama.cpp's gpt-oss, which loads back to the same logits bit for bit; a
// SwiGLU limit other than llama.cpp's fixed 7, or windows on other layers, is refused, and so is
// a quantized Hugging Face checkpoint (whose writer has no MXFP4 experts yet).
TEST(GptOss, GgufRoundTrip) {
  const ModelConfig c = ModelConfig::from_hf_json(tiny_json().dump(), "tiny gpt-oss");
  const ModelWeights w = tiny_weights(c);
  testing::TempDir dir("gpt_oss_gguf");
  const std::string path = dir.file("tiny.gguf");
  save_gguf(path, w, c, nullptr, "tiny");
  const GgufFile g = GgufFile::open(path);
  EXPECT_EQ(g.get_int("gpt-oss.attention.sliding_window"), 4);
  for (const char* name : {"blk.1.post_attention_norm.weight", "blk.1.attn_sinks.weight",
                           "blk.1.ffn_gate_inp.bias", "blk.1.attn_output.bias", "output.weight"})
    EXPECT_NE(g.find_tensor(name), nullptr) << name;
  ASSERT_NE(g.find_tensor("blk.1.ffn_up_exps.bias"), nullptr);
  EXPECT_EQ(g.find_tensor("blk.1.ffn_up_exps.bias")->shape, (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(g.find_tensor("blk.1.ffn_down_exps.weight")->dtype, DType::MXFP4);

  const ModelConfig read = ModelConfig::from_gguf(g);
  EXPECT_EQ(read.arch, ModelArch::GptOss);
  EXPECT_EQ(read.sliding_layers, c.sliding_layers);
  EXPECT_TRUE(read.expert_bias && read.attention_sinks && read.norm_topk_prob);
  EXPECT_EQ(read.swiglu_limit, 7.0);
  const ModelWeights back = load_gguf_weights(g, read);
  const std::vector<int32_t> tokens = {7, 1, 200, 13, 13, 4, 90};
  EXPECT_TRUE(testing::bitwise_equal(testing::prefill_logits(read, back, tokens),
                                     testing::prefill_logits(c, w, tokens)));

  ModelConfig limited = c;
  limited.swiglu_limit = 5;
  EXPECT_THROW(save_gguf(dir.file("limit.gguf"), w, limited, nullptr, "tiny"), Error);
  ModelConfig odd = c;
  odd.sliding_layers = {false, true};
  try {
    save_gguf(dir.file("odd.gguf"), w, odd, nullptr, "tiny");
    ADD_FAILURE() << "wrote a gpt-oss whose second layer slides";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("slides every other layer"), std::string::npos)
        << e.what();
  }
  // Generation stops at <|return|> and <|call|>, never at <|end|> (which ends the analysis),
  // whatever end-of-turn id the file names.
  std::vector<std::string> vocab(256, "x");
  vocab[1] = "<|end|>";
  vocab[2] = "<|return|>";
  vocab[3] = "<|call|>";
  save_gguf(dir.file("harmony.gguf"), w, c, nullptr, "tiny",
            {{"tokenizer.ggml.tokens", GgufValue::string_array(vocab)},
             {"tokenizer.ggml.eot_token_id", GgufValue::u32(1)}});
  EXPECT_EQ(ModelConfig::from_gguf(GgufFile::open(dir.file("harmony.gguf"))).eos_token_ids,
            (std::vector<int32_t>{2, 3}));

  CheckpointFolder folder;
  folder.quantization.method = QuantMethod::Gptq;
  EXPECT_THROW(save_quantized_checkpoint(dir.file("gptq"), w, c, folder), Error);
}

// A Hugging Face folder missing an expert tensor, or holding one of another shape, is named.
TEST(GptOss, MalformedMxfp4TensorsAreNamed) {
  const ModelConfig c = ModelConfig::from_hf_json(tiny_json().dump(), "tiny gpt-oss");
  const ModelWeights w = tiny_weights(c);
  testing::TempDir dir("gpt_oss_bad");
  write_hf_folder(dir, c, w);
  nlohmann::json j = tiny_json();
  j["intermediate_size"] = 96;  // the blocks on file are 64 wide
  std::ofstream(dir.file("config.json")) << j.dump();
  LoadOptions load;
  load.model = dir.path().string();
  try {
    load_model(load);
    ADD_FAILURE() << "loaded experts of the wrong width";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mlp.experts.gate_up_proj_blocks"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tern
