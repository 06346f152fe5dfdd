// The tensor names of the two layouts tern reads and writes: GGUF's (llama.cpp's converter,
// gguf-py constants.py) and Hugging Face transformers' (llama, qwen2, qwen3, qwen2_moe,
// qwen3_moe, gpt_oss).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "tern/models/weight_loader.h"

namespace tern {

// The tensor names of one format; `layer` builds a per-layer name.
struct TensorNames {
  std::string embedding, output_norm, lm_head;
  std::function<std::string(int64_t, std::string_view)> layer;
  // Per-layer suffixes, in the order of LayerWeights' fields.
  const char *attn_norm, *q, *k, *v, *o, *bq, *bk, *bv, *bo, *q_norm, *k_norm, *ffn_norm, *gate,
      *up, *down, *b_gate, *b_up, *b_down;
  // A sparse layer's router and experts' gate, up and down. GGUF stacks the experts into one
  // tensor per matrix ([n_experts, rows, cols], named by `layer`); Hugging Face names each
  // expert's own, which `expert` builds from the layer, the expert and the suffix.
  const char *router, *expert_gate, *expert_up, *expert_down;
  std::function<std::string(int64_t, int64_t, std::string_view)> expert;
  // qwen2moe's shared expert: its gate, up and down, and the vector its sigmoid gate takes
  // (GGUF: [hidden]; Hugging Face: a Linear to one output, [1, hidden]).
  const char *shared_gate, *shared_up, *shared_down, *shared_gate_weight;
  // gpt-oss's attention sinks [n_heads], router bias [n_experts] and (GGUF) the experts'
  // stacked biases [n_experts, rows]. Hugging Face's gpt-oss experts are OpenAI's MXFP4 tensors
  // (openai_experts.h) named by the layer and these prefixes: gate_up_proj (gate and up
  // interleaved, outputs 2j and 2j + 1) and down_proj, each with _blocks, _scales and _bias.
  const char *attn_sinks, *router_bias, *expert_gate_bias, *expert_up_bias, *expert_down_bias;
  const char *fused_gate_up, *fused_down;
  // Gemma 3's post norms ([hidden]).
  const char *attn_post_norm, *ffn_post_norm;
  // Added to every norm's weight as it loads: transformers' Gemma3RMSNorm multiplies by
  // 1 + weight, which llama.cpp's converter writes into the GGUF norms (tern's form).
  float norm_offset = 0;
};

inline const TensorNames kGgufTensorNames{
    "token_embd.weight",
    "output_norm.weight",
    "output.weight",
    [](int64_t i, std::string_view s) { return gguf_tensor_name(i, s); },
    "attn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "attn_q.bias",
    "attn_k.bias",
    "attn_v.bias",
    "attn_output.bias",
    "attn_q_norm.weight",
    "attn_k_norm.weight",
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
    "ffn_gate.bias",
    "ffn_up.bias",
    "ffn_down.bias",
    "ffn_gate_inp.weight",
    "ffn_gate_exps.weight",
    "ffn_up_exps.weight",
    "ffn_down_exps.weight",
    nullptr,
    "ffn_gate_shexp.weight",
    "ffn_up_shexp.weight",
    "ffn_down_shexp.weight",
    "ffn_gate_inp_shexp.weight",
    "attn_sinks.weight",
    "ffn_gate_inp.bias",
    "ffn_gate_exps.bias",
    "ffn_up_exps.bias",
    "ffn_down_exps.bias",
    nullptr,
    nullptr,
    "post_attention_norm.weight",
    "post_ffw_norm.weight"};

inline const TensorNames kHfTensorNames{
    "model.embed_tokens.weight",
    "model.norm.weight",
    "lm_head.weight",
    [](int64_t i, std::string_view s) {
      return "model.layers." + std::to_string(i) + "." + std::string(s);
    },
    "input_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "self_attn.q_proj.bias",
    "self_attn.k_proj.bias",
    "self_attn.v_proj.bias",
    "self_attn.o_proj.bias",
    "self_attn.q_norm.weight",
    "self_attn.k_norm.weight",
    "post_attention_layernorm.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "mlp.gate_proj.bias",
    "mlp.up_proj.bias",
    "mlp.down_proj.bias",
    "mlp.gate.weight",
    "gate_proj.weight",
    "up_proj.weight",
    "down_proj.weight",
    [](int64_t i, int64_t e, std::string_view s) {
      return "model.layers." + std::to_string(i) + ".mlp.experts." + std::to_string(e) + "." +
             std::string(s);
    },
    "mlp.shared_expert.gate_proj.weight",
    "mlp.shared_expert.up_proj.weight",
    "mlp.shared_expert.down_proj.weight",
    "mlp.shared_expert_gate.weight",
    "self_attn.sinks",
    "mlp.router.bias",
    nullptr,
    nullptr,
    nullptr,
    "mlp.experts.gate_up_proj",
    "mlp.experts.down_proj",
    "post_attention_layernorm.weight",
    "post_feedforward_layernorm.weight"};

// The names of `arch`'s tensors in each layout, where the architecture renames the common ones
// (gpt-oss's post_attention_norm and mlp.router, Gemma 3's pre_feedforward_layernorm).
inline TensorNames gguf_tensor_names(ModelArch arch) {
  TensorNames n = kGgufTensorNames;
  if (arch == ModelArch::GptOss) n.ffn_norm = "post_attention_norm.weight";
  return n;
}

inline TensorNames hf_tensor_names(ModelArch arch) {
  TensorNames n = kHfTensorNames;
  if (arch == ModelArch::GptOss) n.router = "mlp.router.weight";
  if (arch == ModelArch::Gemma3) {
    n.ffn_norm = "pre_feedforward_layernorm.weight";
    n.norm_offset = 1;
  }
  return n;
}

}  // namespace tern
