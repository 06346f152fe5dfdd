// The hyperparameters of a decoder of the llama / qwen2 / qwen3 family, of Qwen2's and Qwen3's
// mixtures of experts, of gpt-oss and of Gemma 3 (text), read from a Hugging Face config.json (+
// generation_config.json) or from GGUF metadata. One struct for all seven: the families differ
// only by feature flags (q/k/v bias, q/k RMSNorm, rope scaling, sliding windows, attention sinks,
// Gemma's norms and GeGLU) and, for the mixtures, the experts that replace the MLP.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

class GgufFile;

enum class ModelArch { Llama, Qwen2, Qwen3, Qwen3Moe, Qwen2Moe, GptOss, Gemma3 };
// "llama", "qwen2", "qwen3", "qwen3moe", "qwen2moe", "gpt-oss", "gemma3" (GGUF's
// general.architecture)
std::string_view model_arch_name(ModelArch arch);

enum class RopeScalingType { None, Linear, Llama3, Yarn };
std::string_view rope_scaling_name(RopeScalingType type);  // "none", "linear", "llama3", "yarn"

// RoPE frequency scaling, as transformers defines it:
//   linear: positions are divided by `factor`;
//   llama3: wavelengths longer than original_max_position_embeddings / low_freq_factor are
//           divided by `factor`, shorter than original / high_freq_factor are kept, and those
//           between are interpolated smoothly;
//   yarn:   frequencies that turn fewer than beta_slow times over original_max_position_embeddings
//           are divided by `factor`, more than beta_fast kept, those between mixed along a linear
//           ramp (its ends rounded outwards when `truncate`), and cos/sin multiplied by
//           attention_factor (0.1·ln(factor) + 1 unless the config says; mscale and
//           mscale_all_dim as transformers).
// GGUF files of llama3-scaled models carry no such keys: the converter bakes the per-frequency
// divisors into a `rope_freqs.weight` tensor instead, which the model loader must use.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;                  // llama3 only
  double high_freq_factor = 4.0;                 // llama3 only
  int64_t original_max_position_embeddings = 0;  // llama3, yarn (required), linear (optional)
  double beta_fast = 32.0;                       // yarn only
  double beta_slow = 1.0;                        // yarn only
  bool truncate = true;                          // yarn only
  double attention_factor = 1.0;                 // yarn only
};

// The MLP's gate activation: SiLU (SwiGLU), or the tanh approximation of GELU (GeGLU, Gemma's
// gelu_pytorch_tanh: 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))).
enum class MlpActivation { Silu, GeluTanh };

struct ModelConfig {
  ModelArch arch = ModelArch::Llama;
  std::string arch_name;  // as the file says: "Qwen3ForCausalLM", "llama", …

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;        // d_model
  int64_t intermediate_size = 0;  // d_ff of the SwiGLU MLP
  int64_t num_layers = 0;
  int64_t num_heads = 0;     // query heads
  int64_t num_kv_heads = 0;  // key/value heads (GQA); divides num_heads
  int64_t head_dim = 0;      // `head_dim` when given (Qwen3: 128 whatever hidden/heads is)
  int64_t max_position_embeddings = 0;

  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  RopeScaling rope_scaling;

  bool tie_word_embeddings = false;  // lm_head shares embed_tokens' weight
  bool attention_bias = false;       // q/k/v projections have a bias (always for qwen2)
  bool attention_out_bias = false;   // o_proj has a bias (llama with attention_bias=true)
  bool mlp_bias = false;             // gate/up/down have biases (llama mlp_bias)
  bool qk_norm = false;              // RMSNorm over each head of q and k before RoPE (qwen3)

  // Mixture of experts (qwen2moe, qwen3moe): a sparse layer's MLP is `num_experts` SwiGLU
  // experts of width moe_intermediate_size, of which a router picks num_experts_per_tok per
  // token: softmax over the router's logits, the top k, renormalised to sum 1 when
  // norm_topk_prob. Layer i is sparse unless listed in mlp_only_layers, when (i + 1) is a
  // multiple of decoder_sparse_step; the others keep the dense MLP of intermediate_size.
  // num_experts 0: a dense model. qwen2moe adds a shared expert every token runs, a SwiGLU of
  // width shared_expert_intermediate_size scaled by sigmoid(x · shared_expert_gate); 0: none.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  bool norm_topk_prob = false;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  // gpt-oss's experts: the router and each expert's gate, up and down have biases, the router's
  // weights are the softmax of its top k logits (what norm_topk_prob gives), and the activation
  // is clamped: with g = min(gate, swiglu_limit) and u = clamp(up, ±swiglu_limit), an expert
  // computes down(g · sigmoid(1.702 g) · (u + 1)). swiglu_limit 0: silu(gate) · up.
  bool expert_bias = false;
  double swiglu_limit = 0;
  // gpt-oss: each attention head has a learnt sink logit in its softmax (Backend::attention).
  bool attention_sinks = false;

  // Gemma 3: the embedding rows are multiplied by embedding_scale (√hidden_size); each block's
  // output is RMS-normed before the residual adds it (post_norms: post_attention_norm and
  // post_ffw_norm); the MLP's activation; queries scaled by attention_scale rather than
  // 1/√head_dim (query_pre_attn_scalar^-½; 0: 1/√head_dim); and the sliding layers rotated by
  // rope_local_theta without the rope scaling (0: as every other layer).
  double embedding_scale = 1.0;
  bool post_norms = false;
  MlpActivation mlp_activation = MlpActivation::Silu;
  double attention_scale = 0;
  double rope_local_theta = 0;

  // Sliding-window attention: a query of layer i sees only its last sliding_window keys (its own
  // included) when sliding_layers[i]; sliding_layers empty: every layer sees its whole context.
  // Mistral slides every layer, Qwen2/Qwen3 with use_sliding_window those from
  // max_window_layers on, and a config's layer_types ("sliding_attention") says so per layer.
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;

  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;  // any of them ends generation; may be empty
  std::string torch_dtype;             // "bfloat16", … ("" when unknown)

  // `config_json` is the text of a config.json; `name` (its path, usually) prefixes errors.
  // Throws tern::Error naming the field for a missing required field, a wrong type, an
  // architecture other than llama/qwen2/qwen3/qwen2_moe/qwen3_moe/gpt_oss/gemma3_text, or sizes
  // that do not fit together.
  static ModelConfig from_hf_json(std::string_view config_json, std::string_view name);
  // Reads `dir`/config.json and, when present, `dir`/generation_config.json, whose
  // bos_token_id / eos_token_id replace the config's.
  static ModelConfig from_hf_dir(const std::string& dir);
  // From GGUF metadata (`general.architecture` and the `{arch}.*` keys); tied embeddings when
  // there is no output.weight tensor, q/k/v bias when blk.0.attn_q.bias exists.
  static ModelConfig from_gguf(const GgufFile& gguf);

  // Checks sizes: all positive, num_kv_heads divides num_heads, hidden_size divisible by
  // num_heads when head_dim was derived, head_dim even (RoPE rotates pairs), positive eps and
  // theta, a sane rope scaling, expert counts that fit (1 ≤ k ≤ num_experts) on qwen2moe and
  // qwen3moe (and a shared expert on qwen2moe) and none elsewhere. Throws tern::Error prefixed
  // with `name`.
  void validate(std::string_view name) const;

  // A Hugging Face config.json that from_hf_json reads back as this config (architectures,
  // model_type, the sizes, RoPE and its scaling, biases, token ids, torch_dtype), for a
  // checkpoint written from a model read elsewhere (a GGUF file).
  std::string to_hf_json() const;

  // Whether the architecture's sparse layers are mixtures of experts (qwen2moe, qwen3moe,
  // gpt-oss).
  bool has_experts() const {
    return arch == ModelArch::Qwen2Moe || arch == ModelArch::Qwen3Moe || arch == ModelArch::GptOss;
  }
  // The keys layer `layer`'s attention sees: 0 for its whole context, else the last this many.
  int32_t attention_window(int64_t layer) const {
    return layer < static_cast<int64_t>(sliding_layers.size()) &&
                   sliding_layers[static_cast<size_t>(layer)]
               ? static_cast<int32_t>(sliding_window)
               : 0;
  }
  bool has_sliding_window() const {
    for (bool s : sliding_layers)
      if (s) return true;
    return false;
  }
  // Whether layer `layer`'s MLP is the mixture of experts (see num_experts).
  bool is_moe_layer(int64_t layer) const;
  // intermediate_size when some layer has the dense MLP, else 0 (nothing is that wide).
  int64_t dense_intermediate_size() const;

  // Whether layer `layer` rotates by rope_local_theta (a Gemma 3 sliding layer).
  bool local_rope(int64_t layer) const {
    return rope_local_theta > 0 && attention_window(layer) > 0;
  }

  int64_t q_dim() const { return num_heads * head_dim; }      // width of q_proj's output
  int64_t kv_dim() const { return num_kv_heads * head_dim; }  // width of k_proj / v_proj
};

}  // namespace tern
