// ModelConfig from GGUF metadata, with llama.cpp's key names (gguf-py constants.py) and its
// defaults where a key is optional.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tern/core/error.h"
#include "tern/formats/gguf.h"
#include "tern/formats/model_config.h"

namespace tern {
namespace {

std::optional<int32_t> token_id_or_none(const GgufFile& g, const char* key) {
  auto v = g.get_int(key);
  // llama.cpp writes -1 (or 0xFFFFFFFF) for "no such token".
  if (!v || *v < 0 || *v > std::numeric_limits<int32_t>::max()) return std::nullopt;
  return static_cast<int32_t>(*v);
}

// gpt-oss's harmony format ends a message with <|end|> and the answer with <|return|> (or a tool
// call with <|call|>): generation stops at the latter two, never at <|end|>, whatever the file's
// end-of-turn id says (llama.cpp takes <|end|> out of its stop list for this vocabulary too).
void harmony_stop_tokens(const GgufFile& g, ModelConfig& c) {
  const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->as_array() == nullptr) return;
  const auto& items = tokens->as_array()->items;
  for (size_t id = 0; id < items.size(); ++id) {
    const std::string* text = items[id].as_string();
    if (text == nullptr) continue;
    const auto token = static_cast<int32_t>(id);
    auto& stops = c.eos_token_ids;
    if (*text == "<|end|>")
      stops.erase(std::remove(stops.begin(), stops.end(), token), stops.end());
    if ((*text == "<|return|>" || *text == "<|call|>") &&
        std::find(stops.begin(), stops.end(), token) == stops.end())
      stops.push_back(token);
  }
}

// llama.cpp's sliding layers (set_swa_pattern): with the period `{arch}.attention.
// sliding_window_pattern` (else `default_period`), every layer but the last of each period.
void read_sliding_layers(const GgufFile& g, const std::string& prefix, int64_t default_period,
                         ModelConfig& c) {
  const std::string key = prefix + "attention.sliding_window_pattern";
  const int64_t period = g.get_int(key).value_or(default_period);
  if (g.find(key) != nullptr && (!g.get_int(key) || period <= 0))
    throw Error(g.path() + ": " + key +
                " must be a positive integer (a per-layer list is not supported)");
  // Bounded so that a corrupt block_count cannot allocate; validate() names the mismatch.
  for (int64_t i = 0; i < std::min<int64_t>(c.num_layers, 1 << 20); ++i)
    c.sliding_layers.push_back(i % period < period - 1);
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& g) {
  const std::string& name = g.path();
  auto fail = [&](const std::string& what) { throw Error(name + ": " + what); };

  auto arch_name = g.get_string("general.architecture");
  if (!arch_name) fail("metadata key 'general.architecture' is missing");
  ModelConfig c;
  if (*arch_name == "llama") {
    c.arch = ModelArch::Llama;
  } else if (*arch_name == "qwen2") {
    c.arch = ModelArch::Qwen2;
  } else if (*arch_name == "qwen3") {
    c.arch = ModelArch::Qwen3;
  } else if (*arch_name == "qwen3moe") {
    c.arch = ModelArch::Qwen3Moe;
  } else if (*arch_name == "qwen2moe") {
    c.arch = ModelArch::Qwen2Moe;
  } else if (*arch_name == "gpt-oss") {
    c.arch = ModelArch::GptOss;
  } else if (*arch_name == "gemma3") {
    c.arch = ModelArch::Gemma3;
  } else {
    fail("unsupported architecture '" + *arch_name +
         "' (tern runs llama, qwen2, qwen3, qwen2moe, qwen3moe, gpt-oss and gemma3)");
  }
  c.arch_name = *arch_name;

  const std::string prefix = *arch_name + ".";
  auto opt_int = [&](const char* suffix) { return g.get_int(prefix + suffix); };
  auto req_int = [&](const char* suffix) {
    auto v = g.get_int(prefix + suffix);
    if (!v) fail("metadata key '" + prefix + suffix + "' is missing");
    return *v;
  };
  auto opt_float = [&](const char* suffix) { return g.get_float(prefix + suffix); };

  c.max_position_embeddings = req_int("context_length");
  c.hidden_size = req_int("embedding_length");
  c.intermediate_size = req_int("feed_forward_length");
  c.num_layers = req_int("block_count");
  c.num_heads = req_int("attention.head_count");
  c.num_kv_heads = opt_int("attention.head_count_kv").value_or(c.num_heads);
  auto eps = opt_float("attention.layer_norm_rms_epsilon");
  if (!eps) fail("metadata key '" + prefix + "attention.layer_norm_rms_epsilon' is missing");
  c.rms_norm_eps = *eps;
  c.rope_theta = opt_float("rope.freq_base").value_or(10000.0);

  if (auto key_length = opt_int("attention.key_length")) {
    c.head_dim = *key_length;
  } else {
    if (c.num_heads <= 0 || c.hidden_size % c.num_heads != 0)
      fail(prefix + "embedding_length " + std::to_string(c.hidden_size) + " is not divisible by " +
           prefix + "attention.head_count " + std::to_string(c.num_heads) +
           " (and no key_length is given)");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (auto value_length = opt_int("attention.value_length");
      value_length && *value_length != c.head_dim)
    fail(prefix + "attention.value_length " + std::to_string(*value_length) +
         " differs from the key length " + std::to_string(c.head_dim) + "; not supported");
  if (auto rot = opt_int("rope.dimension_count"); rot && *rot != c.head_dim)
    fail(prefix + "rope.dimension_count " + std::to_string(*rot) + " differs from head_dim " +
         std::to_string(c.head_dim) + "; partial rotary embeddings are not supported");

  // llama.cpp: the type defaults to "linear" and the factor (old key: rope.scale_linear) to 1,
  // which together mean no scaling.
  std::string scaling = g.get_string(prefix + "rope.scaling.type").value_or("linear");
  double factor =
      opt_float("rope.scaling.factor").value_or(opt_float("rope.scale_linear").value_or(0));
  if (factor == 0) factor = 1;
  if (scaling == "linear") {
    if (factor != 1) {
      c.rope_scaling.type = RopeScalingType::Linear;
      c.rope_scaling.factor = factor;
      c.rope_scaling.original_max_position_embeddings =
          opt_int("rope.scaling.original_context_length").value_or(0);
    }
  } else if (scaling == "yarn") {
    // llama.cpp's keys and what its context makes of them: betas 32 and 1, the dims always
    // rounded outwards, cos/sin times 1 + 0.1 ln(factor) (above a factor of 1) and the file's
    // rope.scaling.attn_factor; its yarn_attn_factor is overwritten there, so ignored here.
    RopeScaling& rs = c.rope_scaling;
    rs.type = RopeScalingType::Yarn;
    rs.factor = factor;
    rs.original_max_position_embeddings =
        opt_int("rope.scaling.original_context_length").value_or(0);
    if (rs.original_max_position_embeddings <= 0)
      fail(prefix + "rope.scaling.original_context_length is needed by yarn scaling");
    rs.beta_fast = opt_float("rope.scaling.yarn_beta_fast").value_or(32.0);
    rs.beta_slow = opt_float("rope.scaling.yarn_beta_slow").value_or(1.0);
    rs.attention_factor = (factor > 1 ? 1.0 + 0.1 * std::log(factor) : 1.0) *
                          opt_float("rope.scaling.attn_factor").value_or(1.0);
    if (auto ext = opt_float("rope.scaling.yarn_ext_factor"); ext && *ext != 1.0 && *ext >= 0)
      fail(prefix + "rope.scaling.yarn_ext_factor " + std::to_string(*ext) +
           " is not supported (tern's yarn mixes the frequencies fully, llama.cpp's 1)");
    if (auto log_mul = opt_float("rope.scaling.yarn_log_multiplier"); log_mul && *log_mul != 0)
      fail(prefix + "rope.scaling.yarn_log_multiplier is not supported (DeepSeek's mscale)");
  } else if (scaling != "none") {
    fail(prefix + "rope.scaling.type '" + scaling +
         "' is not supported (tern implements none, linear and yarn from GGUF)");
  }

  if (auto n = opt_int("vocab_size")) {
    c.vocab_size = *n;
  } else if (const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
             tokens != nullptr && tokens->as_array() != nullptr) {
    c.vocab_size = static_cast<int64_t>(tokens->as_array()->items.size());
  } else if (const TensorInfo* embd = g.find_tensor("token_embd.weight");
             embd != nullptr && embd->shape.size() == 2) {
    c.vocab_size = embd->shape[0];
  } else {
    fail("no " + prefix +
         "vocab_size, tokenizer.ggml.tokens or token_embd.weight gives the vocabulary size");
  }

  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  c.attention_bias = g.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.attention_out_bias = g.find_tensor("blk.0.attn_output.bias") != nullptr;
  c.mlp_bias = g.find_tensor("blk.0.ffn_up.bias") != nullptr;
  c.qk_norm = c.arch == ModelArch::Qwen3 || c.arch == ModelArch::Qwen3Moe ||
              g.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  if (c.has_experts()) {
    // Every layer is sparse. llama.cpp renormalises qwen3moe's chosen experts' weights and never
    // qwen2moe's, whatever the checkpoint's norm_topk_prob said (its graphs pass norm_w = true
    // and false).
    c.num_experts = req_int("expert_count");
    c.num_experts_per_tok = req_int("expert_used_count");
    c.moe_intermediate_size =
        opt_int("expert_feed_forward_length")
            .value_or(c.num_experts_per_tok > 0 ? c.intermediate_size / c.num_experts_per_tok : 0);
    c.norm_topk_prob = c.arch == ModelArch::Qwen3Moe || c.arch == ModelArch::GptOss;
  }
  if (c.arch == ModelArch::GptOss) {
    // llama.cpp's gpt-oss: biases on the router and experts, the clamped SwiGLU with its fixed
    // limit 7, sinks, and sliding layers every sliding_window_pattern-th but the last of each
    // period (period 2: the even layers).
    c.expert_bias = c.attention_sinks = true;
    c.swiglu_limit = 7.0;
    c.sliding_window = req_int("attention.sliding_window");
    read_sliding_layers(g, prefix, 2, c);
  }
  if (c.arch == ModelArch::Gemma3) {
    // llama.cpp's gemma3: the embedding times √hidden, the post norms, GeGLU, the sliding layers
    // (when the file gives a window) every sliding_window_pattern-th but the last of each period
    // (6), rotated by rope.freq_base_swa (10000) unscaled; queries scaled by 1/√head_dim, or for
    // the 27B (62 layers) by 1/√(hidden / heads), its query_pre_attn_scalar.
    c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
    c.post_norms = true;
    c.mlp_activation = MlpActivation::GeluTanh;
    c.attention_scale =
        1 / std::sqrt(static_cast<double>(
                c.num_layers == 62 && c.num_heads > 0 ? c.hidden_size / c.num_heads : c.head_dim));
    if (auto softcap = opt_float("final_logit_softcapping"); softcap && *softcap != 0)
      fail(prefix + "final_logit_softcapping is not supported");
    if (auto window = opt_int("attention.sliding_window"); window && *window > 0) {
      c.sliding_window = *window;
      read_sliding_layers(g, prefix, 6, c);
      c.rope_local_theta = opt_float("rope.freq_base_swa").value_or(10000.0);
    }
  }
  if (c.arch == ModelArch::Qwen2Moe)
    c.shared_expert_intermediate_size =
        opt_int("expert_shared_feed_forward_length").value_or(c.intermediate_size);

  c.bos_token_id = token_id_or_none(g, "tokenizer.ggml.bos_token_id");
  // End of generation: EOS, and the end-of-turn / end-of-message tokens when the file names
  // them (Llama 3 instruct models end a turn with <|eot_id|>).
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    auto id = token_id_or_none(g, key);
    if (id &&
        std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), *id) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(*id);
  }

  if (c.arch == ModelArch::GptOss) harmony_stop_tokens(g, c);

  c.validate(name);
  return c;
}

}  // namespace tern
