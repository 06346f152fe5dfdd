// Mixture-of-experts models of test size, as Hugging Face configs (qwen3moe, qwen2moe, gpt-oss),
// and the vectors dummy weights leave zero made non-zero: shared by the CPU decoder's tests and
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

inline ModelConfig config_from_json(const nlohmann::json& j) {
  return ModelConfig::from_hf_json(j.dump(), "tiny mixture of experts");
}

}  // namespace tern::testing
