#include "tern/formats/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "fixtures.h"
#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/gguf.h"

namespace tern {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void expect_config_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message: " << e.what() << "\nwanted: " << p;
  }
}

void expect_qwen3_common(const ModelConfig& c) {
  EXPECT_EQ(c.arch, ModelArch::Qwen3);
  EXPECT_EQ(c.arch_name, "Qwen3ForCausalLM");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1000000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::None);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(ModelConfig, Qwen3_0_6B) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  auto c = ModelConfig::from_hf_dir(testing::fixture("model-configs/qwen3-0.6b"));
  expect_qwen3_common(c);
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.num_layers, 28);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.q_dim(), 2048);  // not hidden_size: Qwen3 sets head_dim explicitly
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
}

TEST(ModelConfig, Qwen3_1_7B) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-1.7b/config.json");
  auto c = ModelConfig::from_hf_dir(testing::fixture("model-configs/qwen3-1.7b"));
  expect_qwen3_common(c);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 6144);
  EXPECT_EQ(c.num_layers, 28);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
}

TEST(ModelConfig, Qwen3_4BWithGenerationConfig) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-4b/generation_config.json");
  const std::string dir = testing::fixture("model-configs/qwen3-4b");
  auto c = ModelConfig::from_hf_dir(dir);
  expect_qwen3_common(c);
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.intermediate_size, 9728);
  EXPECT_EQ(c.num_layers, 36);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_TRUE(c.tie_word_embeddings);
  // generation_config.json's list replaces config.json's single eos.
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  // config.json alone says 151645 only.
  auto alone = ModelConfig::from_hf_json(read_text_file(dir + "/config.json"), "config.json");
  EXPECT_EQ(alone.eos_token_ids, std::vector<int32_t>{151645});
}

TEST(ModelConfig, Qwen3_8B) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-8b/config.json");
  auto c = ModelConfig::from_hf_dir(testing::fixture("model-configs/qwen3-8b"));
  expect_qwen3_common(c);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 12288);
  EXPECT_EQ(c.num_layers, 36);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
}

TEST(ModelConfig, Llama3_2_1BWithLlama3RopeScaling) {
  TERN_REQUIRE_FIXTURE("model-configs/llama-3.2-1b/config.json");
  auto c = ModelConfig::from_hf_dir(testing::fixture("model-configs/llama-3.2-1b"));
  EXPECT_EQ(c.arch, ModelArch::Llama);
  EXPECT_EQ(c.arch_name, "LlamaForCausalLM");
  EXPECT_EQ(model_arch_name(c.arch), "llama");
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.num_layers, 16);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::Llama3);
  EXPECT_EQ(rope_scaling_name(c.rope_scaling.type), "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{128001});
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

// Qwen2.5-0.5B-Instruct's published config.json.
const char* kQwen25Config = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 21,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

TEST(ModelConfig, Qwen2_5WithBiases) {
  auto c = ModelConfig::from_hf_json(kQwen25Config, "qwen2.5/config.json");
  EXPECT_EQ(c.arch, ModelArch::Qwen2);
  EXPECT_EQ(c.arch_name, "Qwen2ForCausalLM");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_heads, 14);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);  // 896 / 14
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);       // q/k/v bias
  EXPECT_FALSE(c.attention_out_bias);  // no o_proj bias
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::None);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
}

json qwen25() { return json::parse(kQwen25Config); }
ModelConfig load(const json& j) { return ModelConfig::from_hf_json(j.dump(), "test/config.json"); }

// Qwen2's use_sliding_window slides the layers from max_window_layers on; layer_types, where a
// config lists them, says it per layer; Qwen2.5's own (use_sliding_window false) slides none.
TEST(ModelConfig, SlidingWindowLayers) {
  EXPECT_FALSE(load(qwen25()).has_sliding_window());
  json j = qwen25();
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  ModelConfig c = load(j);
  EXPECT_EQ(c.attention_window(20), 0);
  EXPECT_EQ(c.attention_window(21), 4096);
  EXPECT_EQ(c.attention_window(23), 4096);
  std::vector<std::string> types(24, "full_attention");
  types[3] = "sliding_attention";
  j["layer_types"] = types;
  c = load(j);
  EXPECT_EQ(c.attention_window(3), 4096);
  EXPECT_EQ(c.attention_window(21), 0);
  const ModelConfig again = load(json::parse(c.to_hf_json()));
  EXPECT_EQ(again.sliding_layers, c.sliding_layers);
  EXPECT_EQ(again.sliding_window, 4096);
}

// YaRN as Qwen3's model cards ask for it (factor 4 over 32768), transformers' attention factor
// (0.1 ln factor + 1, or mscale / mscale_all_dim, or attention_factor given), and GGUF's keys as
// llama.cpp writes and reads them.
TEST(ModelConfig, YarnRopeScaling) {
  json j = qwen25();
  j["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  ModelConfig c = load(j);
  ASSERT_EQ(c.rope_scaling.type, RopeScalingType::Yarn);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 1);
  EXPECT_TRUE(c.rope_scaling.truncate);
  EXPECT_DOUBLE_EQ(c.rope_scaling.attention_factor, 0.1 * std::log(4.0) + 1);
  j["rope_scaling"]["mscale"] = 0.5;
  j["rope_scaling"]["mscale_all_dim"] = 1.0;
  EXPECT_DOUBLE_EQ(load(j).rope_scaling.attention_factor,
                   (0.05 * std::log(4.0) + 1) / (0.1 * std::log(4.0) + 1));
  j["rope_scaling"]["attention_factor"] = 1.25;
  j["rope_scaling"]["truncate"] = false;
  c = load(j);
  EXPECT_DOUBLE_EQ(c.rope_scaling.attention_factor, 1.25);
  const ModelConfig again = load(json::parse(c.to_hf_json()));
  EXPECT_EQ(again.rope_scaling.type, RopeScalingType::Yarn);
  EXPECT_DOUBLE_EQ(again.rope_scaling.attention_factor, 1.25);
  EXPECT_FALSE(again.rope_scaling.truncate);
}

TEST(ModelConfig, DefaultsAndAlternativeSpellings) {
  // model_type alone, no num_key_value_heads / rope_theta / rms_norm_eps / token ids.
  json j = {{"model_type", "llama"},      {"vocab_size", 32000},     {"hidden_size", 4096},
            {"intermediate_size", 11008}, {"num_hidden_layers", 32}, {"num_attention_heads", 32},
            {"head_dim", nullptr},        {"eos_token_id", nullptr}, {"dtype", "float16"},
            {"attention_bias", true},     {"mlp_bias", true}};
  auto c = load(j);
  EXPECT_EQ(c.arch, ModelArch::Llama);
  EXPECT_EQ(c.arch_name, "llama");
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_EQ(c.torch_dtype, "float16");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.attention_out_bias);
  EXPECT_TRUE(c.mlp_bias);

  // Linear scaling with the legacy "type" key.
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  c = load(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::Linear);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);

  // transformers 5 puts theta and scaling under rope_parameters.
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  c = load(j);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::None);

  json q = qwen25();
  q["eos_token_id"] = {151645, 151643};
  EXPECT_EQ(load(q).eos_token_ids, (std::vector<int32_t>{151645, 151643}));
}

TEST(ModelConfig, GenerationConfigOverrides) {
  fs::path dir = fs::path(::testing::TempDir()) / ("tern_cfg_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << kQwen25Config;
  std::ofstream(dir / "generation_config.json")
      << R"({"bos_token_id": 7, "eos_token_id": [1, 2, 3], "temperature": 0.7})";
  auto c = ModelConfig::from_hf_dir(dir.string());
  EXPECT_EQ(c.bos_token_id, 7);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{1, 2, 3}));

  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": "x"})";
  expect_config_error([&] { ModelConfig::from_hf_dir(dir.string()); },
                      {"generation_config.json: ", "'eos_token_id'"});
  fs::remove(dir / "generation_config.json");
  EXPECT_EQ(ModelConfig::from_hf_dir(dir.string()).eos_token_ids, std::vector<int32_t>{151645});
  fs::remove(dir / "config.json");
  expect_config_error([&] { ModelConfig::from_hf_dir(dir.string()); },
                      {dir.string(), "no config.json"});
  fs::remove_all(dir);
}

// Qwen3-30B-A3B (tests/data/model-configs, the published values): the experts' fields, every
// layer sparse, and to_hf_json reads back as the same config.
TEST(ModelConfig, Qwen3_30B_A3B) {
  const ModelConfig c = ModelConfig::from_hf_dir(std::string(TERN_SOURCE_DIR) +
                                                 "/tests/data/model-configs/qwen3-30b-a3b");
  EXPECT_EQ(c.arch, ModelArch::Qwen3Moe);
  EXPECT_EQ(model_arch_name(c.arch), "qwen3moe");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_TRUE(c.norm_topk_prob);
  for (int64_t i = 0; i < c.num_layers; ++i) EXPECT_TRUE(c.is_moe_layer(i)) << i;
  EXPECT_EQ(c.dense_intermediate_size(), 0);
  const ModelConfig again = ModelConfig::from_hf_json(c.to_hf_json(), "again");
  EXPECT_EQ(again.arch, ModelArch::Qwen3Moe);
  EXPECT_EQ(again.num_experts, 128);
  EXPECT_EQ(again.num_experts_per_tok, 8);
  EXPECT_EQ(again.moe_intermediate_size, 768);
  EXPECT_TRUE(again.norm_topk_prob);

  // transformers' layer rule: sparse unless listed in mlp_only_layers, every
  // decoder_sparse_step-th layer.
  json j = json::parse(c.to_hf_json());
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  const ModelConfig mixed = ModelConfig::from_hf_json(j.dump(), "mixed");
  EXPECT_FALSE(mixed.is_moe_layer(0));
  EXPECT_TRUE(mixed.is_moe_layer(1));
  EXPECT_FALSE(mixed.is_moe_layer(3));
  EXPECT_TRUE(mixed.is_moe_layer(5));
  EXPECT_EQ(mixed.dense_intermediate_size(), 6144);

  for (const auto& [field, value, message] :
       {std::tuple{"num_experts", json(0), "num_experts must be in 1..65536, not 0"},
        std::tuple{"num_experts_per_tok", json(129),
                   "num_experts_per_tok must be in 1..num_experts (128), not 129"},
        std::tuple{"moe_intermediate_size", json(-1), "moe_intermediate_size must be positive"},
        std::tuple{"decoder_sparse_step", json(0), "decoder_sparse_step must be positive"},
        std::tuple{"mlp_only_layers", json("all"), "'mlp_only_layers' must be a list"}}) {
    json bad = json::parse(c.to_hf_json());
    bad[field] = value;
    expect_config_error([&] { ModelConfig::from_hf_json(bad.dump(), "bad"); }, {"bad", message});
  }
}

// Qwen1.5-MoE-A2.7B (tests/data/model-configs, the published values): the shared expert, q/k/v
// biases, the chosen weights not renormalised; to_hf_json reads back as the same config.
TEST(ModelConfig, Qwen15MoeA27B) {
  const ModelConfig c = ModelConfig::from_hf_dir(std::string(TERN_SOURCE_DIR) +
                                                 "/tests/data/model-configs/qwen1.5-moe-a2.7b");
  EXPECT_EQ(c.arch, ModelArch::Qwen2Moe);
  EXPECT_EQ(model_arch_name(c.arch), "qwen2moe");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.num_experts, 60);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.moe_intermediate_size, 1408);
  EXPECT_EQ(c.shared_expert_intermediate_size, 5632);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.dense_intermediate_size(), 0);
  const ModelConfig again = ModelConfig::from_hf_json(c.to_hf_json(), "again");
  EXPECT_EQ(again.arch, ModelArch::Qwen2Moe);
  EXPECT_TRUE(again.attention_bias);
  EXPECT_EQ(again.num_experts_per_tok, 4);
  EXPECT_EQ(again.shared_expert_intermediate_size, 5632);
  EXPECT_FALSE(again.norm_topk_prob);

  json bad = json::parse(c.to_hf_json());
  bad["shared_expert_intermediate_size"] = 0;
  expect_config_error([&] { ModelConfig::from_hf_json(bad.dump(), "bad"); },
                      {"bad", "shared_expert_intermediate_size must be positive, not 0"});
  json dense = json::parse(c.to_hf_json());
  dense["architectures"] = {"Qwen3MoeForCausalLM"};
  dense["model_type"] = "qwen3_moe";
  // Read as qwen3moe, the shared expert's width is not one of its fields: ignored, as
  // transformers' Qwen3MoeConfig ignores it.
  EXPECT_EQ(ModelConfig::from_hf_json(dense.dump(), "q3").shared_expert_intermediate_size, 0);
}

// Gemma 3 1B (tests/data/model-configs, the published values): GeGLU, the post norms, the
// embedding times √1152, queries by 1/√256, layers 5, 11, … global and the others sliding over 512
// keys with their own RoPE base; softcapping refused; to_hf_json reads back.
TEST(ModelConfig, Gemma3_1B) {
  const ModelConfig c = ModelConfig::from_hf_dir(std::string(TERN_SOURCE_DIR) +
                                                 "/tests/data/model-configs/gemma-3-1b-it");
  EXPECT_EQ(c.arch, ModelArch::Gemma3);
  EXPECT_EQ(model_arch_name(c.arch), "gemma3");
  EXPECT_EQ(c.mlp_activation, MlpActivation::GeluTanh);
  EXPECT_TRUE(c.post_norms && c.qk_norm && c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_DOUBLE_EQ(c.embedding_scale, std::sqrt(1152.0));
  EXPECT_DOUBLE_EQ(c.attention_scale, 1 / 16.0);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_local_theta, 10000);
  EXPECT_EQ(c.attention_window(0), 512);
  EXPECT_EQ(c.attention_window(5), 0);
  EXPECT_TRUE(c.local_rope(4) && !c.local_rope(11));
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{1, 106}));
  const ModelConfig again = ModelConfig::from_hf_json(c.to_hf_json(), "again");
  EXPECT_EQ(again.arch, ModelArch::Gemma3);
  EXPECT_EQ(again.sliding_layers, c.sliding_layers);
  EXPECT_DOUBLE_EQ(again.attention_scale, c.attention_scale);
  EXPECT_EQ(again.rope_local_theta, 10000);
  EXPECT_EQ(again.mlp_activation, MlpActivation::GeluTanh);
  json capped = json::parse(c.to_hf_json());
  capped["final_logit_softcapping"] = 30.0;
  expect_config_error([&] { ModelConfig::from_hf_json(capped.dump(), "capped"); },
                      {"capped", "final_logit_softcapping"});
}

// gpt-oss-20b (tests/data/model-configs, the published values): every layer 32 experts of 2880
// with biases and the SwiGLU clamped at 7, the layers sliding (128 keys) and full by turns from
// the first, q/k/v/o biases and sinks, YaRN ×32 over 4096 without truncation; its
// quantization_config (MXFP4 experts) read by the loader, not refused; to_hf_json reads back.
TEST(ModelConfig, GptOss20B) {
  const ModelConfig c = ModelConfig::from_hf_dir(std::string(TERN_SOURCE_DIR) +
                                                 "/tests/data/model-configs/gpt-oss-20b");
  EXPECT_EQ(c.arch, ModelArch::GptOss);
  EXPECT_EQ(model_arch_name(c.arch), "gpt-oss");
  EXPECT_TRUE(c.attention_bias && c.attention_out_bias && c.attention_sinks && c.expert_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.num_experts, 32);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.moe_intermediate_size, 2880);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.swiglu_limit, 7.0);
  EXPECT_TRUE(c.is_moe_layer(0) && c.is_moe_layer(23));
  EXPECT_EQ(c.dense_intermediate_size(), 0);
  EXPECT_EQ(c.attention_window(0), 128);
  EXPECT_EQ(c.attention_window(1), 0);
  EXPECT_EQ(c.attention_window(22), 128);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::Yarn);
  EXPECT_FALSE(c.rope_scaling.truncate);
  EXPECT_NEAR(c.rope_scaling.attention_factor, 1 + 0.1 * std::log(32.0), 1e-12);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{200002});
  const ModelConfig again = ModelConfig::from_hf_json(c.to_hf_json(), "again");
  EXPECT_EQ(again.arch, ModelArch::GptOss);
  EXPECT_EQ(again.num_experts, 32);
  EXPECT_EQ(again.swiglu_limit, 7.0);
  EXPECT_EQ(again.sliding_layers, c.sliding_layers);
  EXPECT_EQ(again.sliding_window, 128);

  // Without layer_types, transformers' alternation from the first layer, and its window 128.
  json bare = json::parse(c.to_hf_json());
  bare.erase("layer_types");
  bare.erase("sliding_window");
  const ModelConfig alternating = ModelConfig::from_hf_json(bare.dump(), "bare");
  EXPECT_EQ(alternating.sliding_layers, c.sliding_layers);
  EXPECT_EQ(alternating.sliding_window, 128);
  bare["swiglu_limit"] = -1;
  expect_config_error([&] { ModelConfig::from_hf_json(bare.dump(), "bad"); },
                      {"bad", "swiglu_limit must be a non-negative number"});
}

TEST(ModelConfig, Errors) {
  const std::string name = "test/config.json";
  auto broken = [&](const std::function<void(json&)>& edit) {
    json j = qwen25();
    edit(j);
    return [j] { load(j); };
  };
  expect_config_error(broken([](json& j) {
                        j["architectures"] = {"Gemma3ForConditionalGeneration"};
                        j["model_type"] = "gemma3";
                      }),
                      {name, "unsupported architecture 'Gemma3ForConditionalGeneration'"});
  expect_config_error(broken([](json& j) {
                        j.erase("architectures");
                        j["model_type"] = "gemma2";
                      }),
                      {name, "unsupported architecture 'gemma2'"});
  expect_config_error(broken([](json& j) {
                        j.erase("architectures");
                        j.erase("model_type");
                      }),
                      {name, "neither 'architectures' nor 'model_type'"});
  expect_config_error(broken([](json& j) { j["model_type"] = "llama"; }),
                      {"architectures says 'Qwen2ForCausalLM' but model_type says 'llama'"});
  expect_config_error(broken([](json& j) { j.erase("num_hidden_layers"); }),
                      {name, "required field 'num_hidden_layers' is missing"});
  expect_config_error(broken([](json& j) { j.erase("vocab_size"); }),
                      {name, "required field 'vocab_size' is missing"});
  expect_config_error(broken([](json& j) { j["hidden_size"] = "896"; }),
                      {name, "field 'hidden_size' must be an integer"});
  expect_config_error(broken([](json& j) { j["hidden_size"] = 896.5; }),
                      {name, "field 'hidden_size' must be an integer"});
  expect_config_error(broken([](json& j) { j["tie_word_embeddings"] = 1; }),
                      {name, "field 'tie_word_embeddings' must be true or false"});
  expect_config_error(broken([](json& j) { j["rms_norm_eps"] = "small"; }),
                      {name, "field 'rms_norm_eps' must be a number"});
  expect_config_error(broken([](json& j) { j["num_key_value_heads"] = 4; }),
                      {name, "num_key_value_heads 4 does not divide num_attention_heads 14"});
  expect_config_error(broken([](json& j) { j["num_attention_heads"] = 13; }),
                      {name, "hidden_size 896 is not divisible by num_attention_heads 13"});
  expect_config_error(broken([](json& j) { j["intermediate_size"] = 0; }),
                      {name, "intermediate_size must be positive"});
  expect_config_error(broken([](json& j) { j["num_hidden_layers"] = -3; }),
                      {name, "num_hidden_layers must be positive"});
  expect_config_error(broken([](json& j) { j["head_dim"] = 63; }), {name, "head_dim 63 is odd"});
  expect_config_error(broken([](json& j) { j["rms_norm_eps"] = 0; }), {name, "rms_norm_eps"});
  expect_config_error(broken([](json& j) { j["eos_token_id"] = -1; }), {name, "'eos_token_id'"});
  expect_config_error(broken([](json& j) {
                        j["eos_token_id"] = {1, "x"};
                      }),
                      {name, "'eos_token_id'"});
  expect_config_error(broken([](json& j) { j["hidden_act"] = "gelu"; }),
                      {name, "hidden_act 'gelu'"});
  expect_config_error(broken([](json& j) { j["layer_types"] = json::array({"full_attention"}); }),
                      {name, "'layer_types' must list num_hidden_layers (24)"});
  expect_config_error(
      broken([](json& j) { j["layer_types"] = std::vector<std::string>(24, "chunked_attention"); }),
      {name, "layer type \"chunked_attention\" is not supported"});
  expect_config_error(broken([](json& j) {
                        j["use_sliding_window"] = true;
                        j["sliding_window"] = nullptr;
                      }),
                      {name, "'sliding_window' gives no window"});
  expect_config_error(broken([](json& j) {
                        j["use_sliding_window"] = true;
                        j["sliding_window"] = 0;
                      }),
                      {name, "sliding_window must be positive, not 0"});
  expect_config_error(broken([](json& j) {
                        j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4}};
                      }),
                      {name, "rope scaling type 'dynamic' is not supported"});
  expect_config_error(
      broken([](json& j) {
        j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4}, {"beta_fast", 0}};
      }),
      {name, "yarn rope scaling needs"});
  expect_config_error(broken([](json& j) {
                        j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
                      }),
                      {name, "'rope_scaling.low_freq_factor' is missing"});
  expect_config_error(broken([](json& j) {
                        j["rope_scaling"] = {{"factor", 8.0}};
                      }),
                      {name, "has no rope_type"});
  expect_config_error([&] { ModelConfig::from_hf_json("{\"vocab_size\": ", name); },
                      {name, "invalid JSON"});
  expect_config_error([&] { ModelConfig::from_hf_json("[1]", name); }, {name, "not a JSON object"});
}

// ---------------------------------------------------------------------------------------------
// GGUF

TEST(ModelConfigGguf, Stories260K) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  auto g = GgufFile::open(testing::fixture("stories260K/stories260K.gguf"));
  auto c = ModelConfig::from_gguf(g);
  EXPECT_EQ(c.arch, ModelArch::Llama);
  EXPECT_EQ(c.arch_name, "llama");
  EXPECT_EQ(c.vocab_size, 512);  // no llama.vocab_size: the length of tokenizer.ggml.tokens
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FLOAT_EQ(static_cast<float>(c.rms_norm_eps), 1e-5f);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);  // no rope.freq_base: the default
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::None);
  EXPECT_FALSE(c.tie_word_embeddings);  // output.weight is a tensor of its own
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{2});
}

TEST(ModelConfigGguf, Llama2TinyRandom) {
  TERN_REQUIRE_FIXTURE("llama-2-tiny-random/llama-2-tiny-random.gguf");
  auto g = GgufFile::open(testing::fixture("llama-2-tiny-random/llama-2-tiny-random.gguf"));
  auto c = ModelConfig::from_gguf(g);
  EXPECT_EQ(c.arch, ModelArch::Llama);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.hidden_size, 8);
  EXPECT_EQ(c.intermediate_size, 32);
  EXPECT_EQ(c.num_layers, 1);
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 4);  // = rope.dimension_count
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_FLOAT_EQ(static_cast<float>(c.rms_norm_eps), 1e-5f);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{2});
}

// A GGUF with Qwen3-0.6B's metadata (as llama.cpp's converter writes it) and the few tensors
// the loader looks at.
GgufWriter qwen3_like_writer() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("qwen3"));
  w.set("general.name", GgufValue::string("Qwen3 0.6B"));
  w.set("qwen3.block_count", GgufValue::u32(28));
  w.set("qwen3.context_length", GgufValue::u32(40960));
  w.set("qwen3.embedding_length", GgufValue::u32(1024));
  w.set("qwen3.feed_forward_length", GgufValue::u32(3072));
  w.set("qwen3.attention.head_count", GgufValue::u32(16));
  w.set("qwen3.attention.head_count_kv", GgufValue::u32(8));
  w.set("qwen3.rope.freq_base", GgufValue::f32(1000000.0f));
  w.set("qwen3.attention.layer_norm_rms_epsilon", GgufValue::f32(1e-6f));
  w.set("qwen3.attention.key_length", GgufValue::u32(128));
  w.set("qwen3.attention.value_length", GgufValue::u32(128));
  w.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
  std::vector<std::string> tokens(151936);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::to_string(i);
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(151643));
  w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(151645));
  w.set("tokenizer.ggml.eot_token_id", GgufValue::u32(151645));  // same id: listed once
  w.set("tokenizer.ggml.padding_token_id", GgufValue::u32(151643));
  std::vector<std::byte> norm(128 * 4, std::byte{0});
  w.add_tensor("blk.0.attn_q_norm.weight", DType::F32, {128}, norm);
  w.add_tensor("blk.0.attn_k_norm.weight", DType::F32, {128}, norm);
  return w;
}

GgufFile parse_gguf(const GgufWriter& w, const std::string& name = "qwen3-like.gguf") {
  return GgufFile::parse(std::make_shared<const MappedFile>(name, w.to_bytes()));
}

TEST(ModelConfigGguf, Qwen3Like) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  auto c = ModelConfig::from_gguf(parse_gguf(qwen3_like_writer()));
  // The same values as the HF config of Qwen3-0.6B.
  auto hf = ModelConfig::from_hf_dir(testing::fixture("model-configs/qwen3-0.6b"));
  EXPECT_EQ(c.arch, ModelArch::Qwen3);
  EXPECT_EQ(c.arch_name, "qwen3");
  EXPECT_EQ(c.vocab_size, hf.vocab_size);
  EXPECT_EQ(c.hidden_size, hf.hidden_size);
  EXPECT_EQ(c.intermediate_size, hf.intermediate_size);
  EXPECT_EQ(c.num_layers, hf.num_layers);
  EXPECT_EQ(c.num_heads, hf.num_heads);
  EXPECT_EQ(c.num_kv_heads, hf.num_kv_heads);
  EXPECT_EQ(c.head_dim, hf.head_dim);
  EXPECT_EQ(c.max_position_embeddings, hf.max_position_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, hf.rope_theta);
  EXPECT_FLOAT_EQ(static_cast<float>(c.rms_norm_eps), static_cast<float>(hf.rms_norm_eps));
  EXPECT_EQ(c.tie_word_embeddings, hf.tie_word_embeddings);  // true: no output.weight
  EXPECT_EQ(c.qk_norm, hf.qk_norm);
  EXPECT_EQ(c.attention_bias, hf.attention_bias);
  EXPECT_EQ(c.bos_token_id, hf.bos_token_id);
  EXPECT_EQ(c.eos_token_ids, hf.eos_token_ids);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::None);
}

// llama.cpp's qwen3moe keys; the top k always renormalised, as llama.cpp's graph does.
TEST(ModelConfigGguf, Qwen3Moe) {
  GgufWriter w = qwen3_like_writer();
  w.set("general.architecture", GgufValue::string("qwen3moe"));
  GgufWriter moe;
  const GgufFile dense = parse_gguf(w);
  for (const auto& [key, value] : dense.metadata())
    moe.set(key.starts_with("qwen3.") ? "qwen3moe." + key.substr(6) : key, value);
  expect_config_error([&] { ModelConfig::from_gguf(parse_gguf(moe)); },
                      {"metadata key 'qwen3moe.expert_count' is missing"});
  moe.set("qwen3moe.expert_count", GgufValue::u32(128));
  moe.set("qwen3moe.expert_used_count", GgufValue::u32(8));
  moe.set("qwen3moe.expert_feed_forward_length", GgufValue::u32(768));
  const ModelConfig c = ModelConfig::from_gguf(parse_gguf(moe));
  EXPECT_EQ(c.arch, ModelArch::Qwen3Moe);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.is_moe_layer(0));
  moe.set("qwen3moe.expert_used_count", GgufValue::u32(200));
  expect_config_error([&] { ModelConfig::from_gguf(parse_gguf(moe)); },
                      {"num_experts_per_tok must be in 1..num_experts (128), not 200"});
}

// YaRN from llama.cpp's keys, as its context reads them: cos/sin times 1 + 0.1 ln(factor) and
// rope.scaling.attn_factor.
TEST(ModelConfigGguf, YarnRopeScaling) {
  GgufWriter w = qwen3_like_writer();
  w.set("qwen3.rope.scaling.type", GgufValue::string("yarn"));
  w.set("qwen3.rope.scaling.factor", GgufValue::f32(4.0f));
  w.set("qwen3.rope.scaling.original_context_length", GgufValue::u32(32768));
  ModelConfig g = ModelConfig::from_gguf(parse_gguf(w));
  ASSERT_EQ(g.rope_scaling.type, RopeScalingType::Yarn);
  EXPECT_NEAR(g.rope_scaling.attention_factor, 0.1 * std::log(4.0) + 1, 1e-7);
  w.set("qwen3.rope.scaling.attn_factor", GgufValue::f32(0.5f));
  w.set("qwen3.rope.scaling.yarn_beta_fast", GgufValue::f32(16.0f));
  g = ModelConfig::from_gguf(parse_gguf(w));
  EXPECT_NEAR(g.rope_scaling.attention_factor, 0.5 * (0.1 * std::log(4.0) + 1), 1e-7);
  EXPECT_DOUBLE_EQ(g.rope_scaling.beta_fast, 16);
}

// llama.cpp's qwen2moe keys: the shared expert's width (n_ff when absent), the top k never
// renormalised, as llama.cpp's graph does.
TEST(ModelConfigGguf, Qwen2Moe) {
  GgufWriter w = qwen3_like_writer();
  w.set("general.architecture", GgufValue::string("qwen2moe"));
  GgufWriter moe;
  const GgufFile dense = parse_gguf(w);
  for (const auto& [key, value] : dense.metadata())
    moe.set(key.starts_with("qwen3.") ? "qwen2moe." + key.substr(6) : key, value);
  moe.set("qwen2moe.expert_count", GgufValue::u32(60));
  moe.set("qwen2moe.expert_used_count", GgufValue::u32(4));
  moe.set("qwen2moe.expert_feed_forward_length", GgufValue::u32(1408));
  ModelConfig c = ModelConfig::from_gguf(parse_gguf(moe));
  EXPECT_EQ(c.arch, ModelArch::Qwen2Moe);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.num_experts, 60);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.shared_expert_intermediate_size, c.intermediate_size);
  moe.set("qwen2moe.expert_shared_feed_forward_length", GgufValue::u32(5632));
  c = ModelConfig::from_gguf(parse_gguf(moe));
  EXPECT_EQ(c.shared_expert_intermediate_size, 5632);
}

TEST(ModelConfigGguf, Qwen2BiasTiedAndScaling) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("qwen2"));
  w.set("qwen2.block_count", GgufValue::u32(24));
  w.set("qwen2.context_length", GgufValue::u32(32768));
  w.set("qwen2.embedding_length", GgufValue::u32(896));
  w.set("qwen2.feed_forward_length", GgufValue::u32(4864));
  w.set("qwen2.attention.head_count", GgufValue::u32(14));
  w.set("qwen2.attention.head_count_kv", GgufValue::u32(2));
  w.set("qwen2.rope.freq_base", GgufValue::f32(1000000.0f));
  w.set("qwen2.attention.layer_norm_rms_epsilon", GgufValue::f32(1e-6f));
  w.set("qwen2.vocab_size", GgufValue::u32(151936));
  w.set("qwen2.rope.scaling.type", GgufValue::string("linear"));
  w.set("qwen2.rope.scaling.factor", GgufValue::f32(4.0f));
  w.set("qwen2.rope.scaling.original_context_length", GgufValue::u32(8192));
  w.set("tokenizer.ggml.bos_token_id", GgufValue::i32(-1));  // "none"
  w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(151645));
  w.set("tokenizer.ggml.eot_token_id", GgufValue::u32(151643));
  std::vector<std::byte> bias(128 * 4, std::byte{0});
  w.add_tensor("blk.0.attn_q.bias", DType::F32, {128}, bias);
  w.add_tensor("output.weight", DType::F32, {128}, bias);
  auto c = ModelConfig::from_gguf(parse_gguf(w, "qwen2-like.gguf"));
  EXPECT_EQ(c.arch, ModelArch::Qwen2);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.head_dim, 64);  // 896 / 14
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::Linear);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
}

TEST(ModelConfigGguf, Errors) {
  auto broken = [](const std::function<void(GgufWriter&)>& edit) {
    GgufWriter w = qwen3_like_writer();
    edit(w);
    auto bytes = w.to_bytes();
    return [bytes] {
      ModelConfig::from_gguf(
          GgufFile::parse(std::make_shared<const MappedFile>("bad.gguf", bytes)));
    };
  };
  expect_config_error(
      broken([](GgufWriter& w) { w.set("general.architecture", GgufValue::string("gemma2")); }),
      {"bad.gguf: ", "unsupported architecture 'gemma2'"});
  expect_config_error(
      broken([](GgufWriter& w) { w.set("general.architecture", GgufValue::string("llama")); }),
      {"bad.gguf: ", "'llama.context_length' is missing"});
  expect_config_error(
      broken([](GgufWriter& w) { w.set("qwen3.attention.head_count_kv", GgufValue::u32(5)); }),
      {"bad.gguf: ", "num_key_value_heads 5 does not divide num_attention_heads 16"});
  expect_config_error(
      broken([](GgufWriter& w) { w.set("qwen3.rope.scaling.type", GgufValue::string("yarn")); }),
      {"bad.gguf: ", "rope.scaling.original_context_length is needed by yarn scaling"});
  expect_config_error(broken([](GgufWriter& w) {
                        w.set("qwen3.rope.scaling.type", GgufValue::string("longrope"));
                      }),
                      {"bad.gguf: ", "rope.scaling.type 'longrope' is not supported"});
  expect_config_error(
      broken([](GgufWriter& w) { w.set("qwen3.rope.dimension_count", GgufValue::u32(64)); }),
      {"bad.gguf: ", "partial rotary"});
  expect_config_error(
      broken([](GgufWriter& w) { w.set("qwen3.block_count", GgufValue::string("28")); }),
      {"bad.gguf", "qwen3.block_count"});
}

}  // namespace
}  // namespace tern
