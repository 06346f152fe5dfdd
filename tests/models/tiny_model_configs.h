// Models of test size as Hugging Face configs: the mixtures of experts (qwen3moe, qwen2moe,
// gpt-oss) and Gemma 3; and what dummy weights leave plain made patterned (zero vectors, ones
// norms), so that a forward that dropped one would differ. Shared by the CPU decoder's tests and
// the Vulkan backend's.
#pragma once

#include <nlohmann/json.hpp>

#include "tern/formats/model_config.h"
#include "tern/weights/model_weights.h"

namespace tern::testing {

// A Qwen3-MoE of test size: 2 layers of hidden 256, 4 q and 2 kv heads of 64, 6 experts of
// 256 (whole K-quant super-blocks), 2 chosen per token, vocabulary 512.
inline nlohmann::json tiny_moe_json() {
  return {{"architectures", {"Qwen3MoeForCausalLM"}},
          {"model_type", "qwen3_moe"},
          {"vocab_size", 512},
          {"hidden_size", 256},
          {"intermediate_size", 512},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 64},
          {"rope_theta", 10000.0},
          {"rms_norm_eps", 1e-6},
          {"tie_word_embeddings", false},
          {"num_experts", 6},
          {"num_experts_per_tok", 2},
          {"moe_intermediate_size", 256},
          {"norm_topk_prob", true}};
}

// A Qwen2-MoE of test size: as above with q/k/v biases, no q/k norms, a shared expert of 512,
// 3 chosen per token and their softmax weights not renormalised (Qwen1.5-MoE's settings).
inline nlohmann::json tiny_qwen2moe_json() {
  nlohmann::json j = tiny_moe_json();
  j["architectures"] = {"Qwen2MoeForCausalLM"};
  j["model_type"] = "qwen2_moe";
  j["num_experts_per_tok"] = 3;
  j["norm_topk_prob"] = false;
  j["shared_expert_intermediate_size"] = 512;
  return j;
}

// A gpt-oss of test size: 2 layers of hidden 256, the first sliding over 3 keys, 4 q and 2 kv
// heads of 64 with biases and sinks, 6 experts of 256 with biases, 2 chosen per token, the SwiGLU
// clamped at 0.3 (a third of the dummy weights' gates and ups reach it; gpt-oss's 7 none would).
inline nlohmann::json tiny_gpt_oss_json() {
  nlohmann::json j = tiny_moe_json();
  j["architectures"] = {"GptOssForCausalLM"};
  j["model_type"] = "gpt_oss";
  j["intermediate_size"] = 256;
  for (const char* key : {"num_experts", "moe_intermediate_size", "norm_topk_prob"}) j.erase(key);
  j["num_local_experts"] = 6;
  j["sliding_window"] = 3;
  j["swiglu_limit"] = 0.3;
  return j;
}

// The vectors dummy weights leave zero (biases, sinks), patterned, so that a forward that
// dropped one would differ.
inline void pattern_vectors(ModelWeights& w) {
  auto fill = [&](std::span<const float>& v, float scale) {
    std::span<float> out = w.own_floats(v.size());
    for (size_t e = 0; e < out.size(); ++e)
      out[e] = scale * (static_cast<float>((e * 7 + 3) % 11) - 5.0f);
    v = out;
  };
  for (LayerWeights& l : w.layers) {
    for (std::span<const float>* b : {&l.bq, &l.bk, &l.bv, &l.bo}) fill(*b, 0.01f);
    fill(l.attn_sinks, 0.3f);
    if (!l.moe) continue;
    fill(l.moe->router_bias, 0.05f);
    for (std::span<const float>* b : {&l.moe->gate_bias, &l.moe->up_bias, &l.moe->down_bias})
      fill(*b, 0.02f);
  }
}

// A Gemma 3 of test size: 3 layers of hidden 64 (two sliding over 4 keys, then a global one), 4
// q and 2 kv heads of 16, GeGLU of 128, vocabulary 512, tied.
inline nlohmann::json tiny_gemma3_json() {
  return {{"architectures", {"Gemma3ForCausalLM"}},
          {"model_type", "gemma3_text"},
          {"vocab_size", 512},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 3},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"query_pre_attn_scalar", 16},
          {"sliding_window", 4},
          {"sliding_window_pattern", 3},
          {"rope_theta", 1000000.0},
          {"rope_local_base_freq", 10000.0},
          {"rms_norm_eps", 1e-6}};
}

// Every norm 0.5 + k/8 (k = index % 9), as a checkpoint's are not ones; exact as Hugging Face's
// Gemma stores them (weight − 1) and back.
inline void pattern_norms(ModelWeights& w) {
  auto pattern = [&](std::span<const float>& v) {
    if (v.empty()) return;
    std::span<float> out = w.own_floats(v.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = 0.5f + 0.125f * static_cast<float>(i % 9);
    v = out;
  };
  for (LayerWeights& l : w.layers)
    for (std::span<const float>* n :
         {&l.attn_norm, &l.attn_post_norm, &l.ffn_norm, &l.ffn_post_norm, &l.q_norm, &l.k_norm})
      pattern(*n);
  pattern(w.output_norm);
}

inline ModelConfig config_from_json(const nlohmann::json& j) {
  return ModelConfig::from_hf_json(j.dump(), "tiny mixture of experts");
}

}  // namespace tern::testing
