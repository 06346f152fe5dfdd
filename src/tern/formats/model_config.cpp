// ModelConfig from Hugging Face config.json / generation_config.json, and the checks every
// loader shares. The GGUF loader is in model_config_gguf.cpp.
#include "tern/formats/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/json_fields.h"
#include "tern/formats/json_util.h"

namespace tern {
namespace {

using nlohmann::json;

std::optional<ModelArch> arch_from_hf(std::string_view s) {
  // Mistral is llama with a sliding window (which its GGUF files, as llama, do not say).
  if (s == "LlamaForCausalLM" || s == "llama" || s == "MistralForCausalLM" || s == "mistral")
    return ModelArch::Llama;
  if (s == "Qwen2ForCausalLM" || s == "qwen2") return ModelArch::Qwen2;
  if (s == "Qwen3ForCausalLM" || s == "qwen3") return ModelArch::Qwen3;
  if (s == "Qwen3MoeForCausalLM" || s == "qwen3_moe") return ModelArch::Qwen3Moe;
  if (s == "Qwen2MoeForCausalLM" || s == "qwen2_moe") return ModelArch::Qwen2Moe;
  if (s == "GptOssForCausalLM" || s == "gpt_oss") return ModelArch::GptOss;
  if (s == "Gemma3ForCausalLM" || s == "gemma3_text") return ModelArch::Gemma3;
  return std::nullopt;
}

// rope_scaling (transformers 4.x) or rope_parameters (5.x): {"rope_type" (or legacy "type"),
// "factor", …}.
RopeScaling parse_rope_scaling(const json& obj, std::string_view name, const std::string& prefix,
                               int64_t max_position_embeddings) {
  JsonFields f(obj, name, prefix);
  RopeScaling rs;
  auto type = f.opt_string("rope_type");
  if (!type) type = f.opt_string("type");
  if (!type)
    f.fail("field " + quote_name(prefix.substr(0, prefix.size() - 1)) + " has no rope_type");
  if (*type == "default") return rs;
  if (*type == "linear") {
    rs.type = RopeScalingType::Linear;
    rs.factor = f.req_double("factor");
    rs.original_max_position_embeddings = f.opt_int("original_max_position_embeddings").value_or(0);
    return rs;
  }
  if (*type == "llama3") {
    rs.type = RopeScalingType::Llama3;
    rs.factor = f.req_double("factor");
    rs.low_freq_factor = f.req_double("low_freq_factor");
    rs.high_freq_factor = f.req_double("high_freq_factor");
    rs.original_max_position_embeddings = f.req_int("original_max_position_embeddings");
    return rs;
  }
  if (*type == "yarn") {
    rs.type = RopeScalingType::Yarn;
    rs.factor = f.req_double("factor");
    rs.original_max_position_embeddings =
        f.opt_int("original_max_position_embeddings").value_or(max_position_embeddings);
    rs.beta_fast = f.opt_double("beta_fast").value_or(32.0);
    rs.beta_slow = f.opt_double("beta_slow").value_or(1.0);
    rs.truncate = f.opt_bool("truncate").value_or(true);
    // transformers' get_mscale: 0.1 · mscale · ln(factor) + 1 above a factor of 1.
    auto mscale = [&](double m) {
      return rs.factor <= 1 ? 1.0 : 0.1 * m * std::log(rs.factor) + 1;
    };
    const std::optional<double> m = f.opt_double("mscale"), all = f.opt_double("mscale_all_dim");
    rs.attention_factor =
        f.opt_double("attention_factor")
            .value_or(m && all && *m != 0 && *all != 0 ? mscale(*m) / mscale(*all) : mscale(1.0));
    return rs;
  }
  f.fail("rope scaling type " + quote_name(*type) +
         " is not supported (tern implements default, linear, llama3 and yarn)");
}

// The mixtures of experts' router normalisation and which layers are sparse.
void read_sparse_layers(const JsonFields& f, ModelConfig& c) {
  c.norm_topk_prob = f.opt_bool("norm_topk_prob").value_or(false);
  c.decoder_sparse_step = f.opt_int("decoder_sparse_step").value_or(1);
  if (const json* only = f.find("mlp_only_layers")) {
    if (!only->is_array()) f.fail("field 'mlp_only_layers' must be a list of layer indices");
    for (const json& i : *only) {
      if (!i.is_number_integer())
        f.fail("field 'mlp_only_layers' must be a list of layer indices, not " + only->dump());
      c.mlp_only_layers.push_back(i.get<int64_t>());
    }
  }
}

// Which layers slide (ModelConfig::sliding_layers): the config's layer_types where it lists
// them (transformers ≥ 4.53), else each family's rule: Mistral every layer when sliding_window
// is set; Qwen2/Qwen3 with use_sliding_window the layers from max_window_layers on (transformers'
// default 28); llama none.
void read_sliding_window(const JsonFields& f, std::string_view arch_name, ModelConfig& c) {
  const std::optional<int64_t> window = f.opt_int("sliding_window");
  std::vector<bool> sliding;
  if (const json* types = f.find("layer_types")) {
    if (!types->is_array() || types->size() != static_cast<size_t>(c.num_layers))
      f.fail("field 'layer_types' must list num_hidden_layers (" + std::to_string(c.num_layers) +
             ") layer types");
    for (const json& t : *types) {
      if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
        f.fail("layer type " + t.dump() +
               " is not supported (tern runs full_attention and sliding_attention)");
      sliding.push_back(t == "sliding_attention");
    }
  } else if (arch_name == "MistralForCausalLM" || arch_name == "mistral") {
    if (window) sliding.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), true);
  } else if (c.arch == ModelArch::GptOss) {
    // transformers' GptOssConfig: sliding and full layers alternate, the first sliding.
    for (int64_t i = 0; i < c.num_layers; ++i) sliding.push_back(i % 2 == 0);
  } else if (c.arch == ModelArch::Gemma3) {
    // transformers' Gemma3TextConfig: every sliding_window_pattern-th layer is global.
    const int64_t period = f.opt_int("sliding_window_pattern").value_or(6);
    if (period <= 0) f.fail("sliding_window_pattern must be positive");
    for (int64_t i = 0; i < c.num_layers; ++i) sliding.push_back((i + 1) % period != 0);
  } else if (c.arch != ModelArch::Llama && f.opt_bool("use_sliding_window").value_or(false)) {
    const int64_t from = f.opt_int("max_window_layers").value_or(28);
    for (int64_t i = 0; i < c.num_layers; ++i) sliding.push_back(i >= from);
  }
  if (std::find(sliding.begin(), sliding.end(), true) == sliding.end()) return;
  // transformers' defaults: gpt-oss's 128, Gemma 3's 4096.
  const std::optional<int64_t> given =
      c.arch == ModelArch::GptOss   ? std::optional<int64_t>(window.value_or(128))
      : c.arch == ModelArch::Gemma3 ? std::optional<int64_t>(window.value_or(4096))
                                    : window;
  if (!given) f.fail("layers slide, but 'sliding_window' gives no window");
  c.sliding_window = *given;
  c.sliding_layers = std::move(sliding);
}

}  // namespace

std::string_view model_arch_name(ModelArch arch) {
  switch (arch) {
    case ModelArch::Llama:
      return "llama";
    case ModelArch::Qwen2:
      return "qwen2";
    case ModelArch::Qwen3:
      return "qwen3";
    case ModelArch::Qwen3Moe:
      return "qwen3moe";
    case ModelArch::Qwen2Moe:
      return "qwen2moe";
    case ModelArch::GptOss:
      return "gpt-oss";
    case ModelArch::Gemma3:
      return "gemma3";
  }
  return "unknown";
}

std::string_view rope_scaling_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::None:
      return "none";
    case RopeScalingType::Linear:
      return "linear";
    case RopeScalingType::Llama3:
      return "llama3";
    case RopeScalingType::Yarn:
      return "yarn";
  }
  return "unknown";
}

ModelConfig ModelConfig::from_hf_json(std::string_view config_json, std::string_view name) {
  json root;
  try {
    root = json::parse(config_json);
  } catch (const json::exception& e) {
    throw Error(std::string(name) + ": invalid JSON: " + e.what());
  }
  if (!root.is_object()) throw Error(std::string(name) + ": not a JSON object");
  JsonFields f(root, name);
  ModelConfig c;

  // Architecture: architectures[0] when given, else model_type; both must agree.
  std::optional<std::string> model_type = f.opt_string("model_type");
  std::optional<std::string> architecture;
  if (const json* archs = f.find("architectures")) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string())
      f.fail("field 'architectures' must be a non-empty list of strings, not " + archs->dump());
    architecture = (*archs)[0].get<std::string>();
  }
  if (!architecture && !model_type)
    f.fail("neither 'architectures' nor 'model_type' says which model this is");
  const std::string& arch_name = architecture ? *architecture : *model_type;
  auto arch = arch_from_hf(arch_name);
  if (!arch)
    f.fail("unsupported architecture " + quote_name(arch_name) +
           (model_type && architecture ? " (model_type " + quote_name(*model_type) + ")" : "") +
           "; tern runs LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
           "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, GptOssForCausalLM and "
           "Gemma3ForCausalLM");
  if (architecture && model_type) {
    auto by_type = arch_from_hf(*model_type);
    if (by_type && *by_type != *arch)
      f.fail("architectures says " + quote_name(*architecture) + " but model_type says " +
             quote_name(*model_type));
  }
  c.arch = *arch;
  c.arch_name = arch_name;

  if (c.arch == ModelArch::Gemma3) {
    // Gemma names it hidden_activation (hidden_act in older configs), tanh-approximated GELU.
    const std::string act = f.opt_string("hidden_activation")
                                .value_or(f.opt_string("hidden_act").value_or("gelu_pytorch_tanh"));
    if (act != "gelu_pytorch_tanh")
      f.fail("hidden_activation " + quote_name(act) +
             " is not supported (Gemma 3's MLP is GeGLU with gelu_pytorch_tanh)");
    c.mlp_activation = MlpActivation::GeluTanh;
  } else if (auto act = f.opt_string("hidden_act"); act && *act != "silu") {
    f.fail("hidden_act " + quote_name(*act) + " is not supported (the MLP is SwiGLU with silu)");
  }

  c.vocab_size = f.req_int("vocab_size");
  c.hidden_size = f.req_int("hidden_size");
  c.intermediate_size = f.req_int("intermediate_size");
  c.num_layers = f.req_int("num_hidden_layers");
  c.num_heads = f.req_int("num_attention_heads");
  c.num_kv_heads = f.opt_int("num_key_value_heads").value_or(c.num_heads);
  if (auto head_dim = f.opt_int("head_dim")) {
    c.head_dim = *head_dim;
  } else if (c.arch == ModelArch::Gemma3) {
    c.head_dim = 256;  // Gemma3TextConfig's default
  } else {
    if (c.num_heads <= 0)
      f.fail("num_attention_heads must be positive, not " + std::to_string(c.num_heads));
    if (c.hidden_size % c.num_heads != 0)
      f.fail("hidden_size " + std::to_string(c.hidden_size) +
             " is not divisible by num_attention_heads " + std::to_string(c.num_heads) +
             " (and no head_dim is given)");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  // transformers' defaults where a field is absent.
  const bool gemma = c.arch == ModelArch::Gemma3;
  c.max_position_embeddings = f.opt_int("max_position_embeddings")
                                  .value_or(c.arch == ModelArch::Llama ? 2048
                                            : gemma                    ? 131072
                                                                       : 32768);
  c.rms_norm_eps = f.opt_double("rms_norm_eps").value_or(1e-6);
  c.tie_word_embeddings = f.opt_bool("tie_word_embeddings").value_or(gemma);

  c.rope_theta = f.opt_double("rope_theta").value_or(gemma ? 1000000.0 : 10000.0);
  if (const json* params = f.find("rope_parameters")) {
    if (!params->is_object()) f.fail("field 'rope_parameters' must be an object");
    JsonFields p(*params, name, "rope_parameters.");
    c.rope_theta = p.opt_double("rope_theta").value_or(c.rope_theta);
    if (p.find("rope_type") || p.find("type"))
      c.rope_scaling =
          parse_rope_scaling(*params, name, "rope_parameters.", c.max_position_embeddings);
  } else if (const json* scaling = f.find("rope_scaling")) {
    if (!scaling->is_object()) f.fail("field 'rope_scaling' must be an object or null");
    c.rope_scaling = parse_rope_scaling(*scaling, name, "rope_scaling.", c.max_position_embeddings);
  }

  switch (c.arch) {
    case ModelArch::Llama:
      c.attention_bias = c.attention_out_bias = f.opt_bool("attention_bias").value_or(false);
      c.mlp_bias = f.opt_bool("mlp_bias").value_or(false);
      break;
    case ModelArch::Qwen2:  // q/k/v always carry a bias, o_proj never
      c.attention_bias = true;
      break;
    case ModelArch::Qwen3:
      c.attention_bias = c.attention_out_bias = f.opt_bool("attention_bias").value_or(false);
      c.qk_norm = true;
      break;
    case ModelArch::Qwen3Moe:
      c.attention_bias = c.attention_out_bias = f.opt_bool("attention_bias").value_or(false);
      c.qk_norm = true;
      // transformers' Qwen3MoeConfig defaults where a field is absent.
      c.num_experts = f.opt_int("num_experts").value_or(128);
      c.num_experts_per_tok = f.opt_int("num_experts_per_tok").value_or(8);
      c.moe_intermediate_size = f.opt_int("moe_intermediate_size").value_or(768);
      read_sparse_layers(f, c);
      break;
    case ModelArch::Qwen2Moe:
      // q/k/v carry a bias (qkv_bias, true unless said otherwise), o_proj never; transformers'
      // Qwen2MoeConfig defaults where a field is absent.
      c.attention_bias = f.opt_bool("qkv_bias").value_or(true);
      c.num_experts = f.opt_int("num_experts").value_or(60);
      c.num_experts_per_tok = f.opt_int("num_experts_per_tok").value_or(4);
      c.moe_intermediate_size = f.opt_int("moe_intermediate_size").value_or(1408);
      c.shared_expert_intermediate_size =
          f.opt_int("shared_expert_intermediate_size").value_or(5632);
      read_sparse_layers(f, c);
      break;
    case ModelArch::Gemma3:
      // transformers' Gemma3TextConfig defaults where a field is absent.
      c.attention_bias = c.attention_out_bias = f.opt_bool("attention_bias").value_or(false);
      c.qk_norm = true;
      c.post_norms = true;
      c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
      c.attention_scale = 1 / std::sqrt(f.opt_double("query_pre_attn_scalar").value_or(256));
      c.rope_local_theta = f.opt_double("rope_local_base_freq").value_or(10000.0);
      for (const char* softcap : {"final_logit_softcapping", "attn_logit_softcapping"})
        if (const json* v = f.find(softcap); v != nullptr && !v->is_null())
          f.fail(std::string("field '") + softcap +
                 "' is not supported (Gemma 3 has none; Gemma 2's softcapping is not run)");
      break;
    case ModelArch::GptOss:
      // Every layer a mixture of experts as wide as intermediate_size, q/k/v/o with biases
      // (attention_bias), sinks; transformers' GptOssConfig defaults where a field is absent.
      c.attention_bias = c.attention_out_bias = f.opt_bool("attention_bias").value_or(true);
      c.num_experts = f.opt_int("num_local_experts").value_or(128);
      c.num_experts_per_tok = f.opt_int("num_experts_per_tok").value_or(4);
      c.moe_intermediate_size = c.intermediate_size;
      c.norm_topk_prob = true;
      c.expert_bias = true;
      c.swiglu_limit = f.opt_double("swiglu_limit").value_or(7.0);
      c.attention_sinks = true;
      break;
  }

  read_sliding_window(f, arch_name, c);

  c.bos_token_id = f.opt_token_id("bos_token_id");
  c.eos_token_ids = f.opt_token_ids("eos_token_id").value_or(std::vector<int32_t>{});
  c.torch_dtype = f.opt_string("torch_dtype").value_or(f.opt_string("dtype").value_or(""));

  c.validate(name);
  return c;
}

std::string ModelConfig::to_hf_json() const {
  json j;
  static constexpr const char* kArchitectures[] = {
      "LlamaForCausalLM",    "Qwen2ForCausalLM",  "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
      "Qwen2MoeForCausalLM", "GptOssForCausalLM", "Gemma3ForCausalLM"};
  static constexpr const char* kModelTypes[] = {"llama",     "qwen2",   "qwen3",      "qwen3_moe",
                                                "qwen2_moe", "gpt_oss", "gemma3_text"};
  j["architectures"] = {kArchitectures[static_cast<int>(arch)]};
  j["model_type"] = kModelTypes[static_cast<int>(arch)];
  if (has_sliding_window()) {
    // transformers' llama never slides: a llama that does is a Mistral.
    if (arch == ModelArch::Llama) {
      j["architectures"] = {"MistralForCausalLM"};
      j["model_type"] = "mistral";
    }
    j["sliding_window"] = sliding_window;
    j["use_sliding_window"] = true;
    std::vector<std::string> types;
    for (bool s : sliding_layers) types.push_back(s ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
  }
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_layers;
  j["num_attention_heads"] = num_heads;
  j["num_key_value_heads"] = num_kv_heads;
  j["head_dim"] = head_dim;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  if (mlp_activation == MlpActivation::GeluTanh)
    j["hidden_activation"] = "gelu_pytorch_tanh";
  else
    j["hidden_act"] = "silu";
  if (arch == ModelArch::Gemma3) {
    j["query_pre_attn_scalar"] = 1 / (attention_scale * attention_scale);
    j["rope_local_base_freq"] = rope_local_theta;
  }
  j["tie_word_embeddings"] = tie_word_embeddings;
  if (arch == ModelArch::Qwen2Moe) j["qkv_bias"] = attention_bias;
  if (arch != ModelArch::Qwen2 && arch != ModelArch::Qwen2Moe) j["attention_bias"] = attention_bias;
  if (arch == ModelArch::Llama) j["mlp_bias"] = mlp_bias;
  if (arch == ModelArch::Qwen2Moe)
    j["shared_expert_intermediate_size"] = shared_expert_intermediate_size;
  if (arch == ModelArch::GptOss) {
    j["num_local_experts"] = num_experts;
    j["num_experts_per_tok"] = num_experts_per_tok;
    j["swiglu_limit"] = swiglu_limit;
  } else if (has_experts()) {
    j["num_experts"] = num_experts;
    j["num_experts_per_tok"] = num_experts_per_tok;
    j["moe_intermediate_size"] = moe_intermediate_size;
    j["norm_topk_prob"] = norm_topk_prob;
    j["decoder_sparse_step"] = decoder_sparse_step;
    j["mlp_only_layers"] = mlp_only_layers;
  }
  switch (rope_scaling.type) {
    case RopeScalingType::None:
      j["rope_scaling"] = nullptr;
      break;
    case RopeScalingType::Linear:
      j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", rope_scaling.factor}};
      if (rope_scaling.original_max_position_embeddings > 0)
        j["rope_scaling"]["original_max_position_embeddings"] =
            rope_scaling.original_max_position_embeddings;
      break;
    case RopeScalingType::Llama3:
      j["rope_scaling"] = {
          {"rope_type", "llama3"},
          {"factor", rope_scaling.factor},
          {"low_freq_factor", rope_scaling.low_freq_factor},
          {"high_freq_factor", rope_scaling.high_freq_factor},
          {"original_max_position_embeddings", rope_scaling.original_max_position_embeddings}};
      break;
    case RopeScalingType::Yarn:
      j["rope_scaling"] = {
          {"rope_type", "yarn"},
          {"factor", rope_scaling.factor},
          {"original_max_position_embeddings", rope_scaling.original_max_position_embeddings},
          {"beta_fast", rope_scaling.beta_fast},
          {"beta_slow", rope_scaling.beta_slow},
          {"truncate", rope_scaling.truncate},
          {"attention_factor", rope_scaling.attention_factor}};
      break;
  }
  if (bos_token_id) j["bos_token_id"] = *bos_token_id;
  if (eos_token_ids.size() == 1) j["eos_token_id"] = eos_token_ids[0];
  if (eos_token_ids.size() > 1) j["eos_token_id"] = eos_token_ids;
  if (!torch_dtype.empty()) j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

ModelConfig ModelConfig::from_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path config_path = fs::path(dir) / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(config_path, ec)) throw Error(dir + ": no config.json in this folder");
  ModelConfig c = from_hf_json(read_text_file(config_path.string()), config_path.string());

  const fs::path gen_path = fs::path(dir) / "generation_config.json";
  if (fs::is_regular_file(gen_path, ec)) {
    const std::string name = gen_path.string();
    json gen;
    try {
      gen = json::parse(read_text_file(name));
    } catch (const json::exception& e) {
      throw Error(name + ": invalid JSON: " + e.what());
    }
    if (!gen.is_object()) throw Error(name + ": not a JSON object");
    JsonFields f(gen, name);
    if (auto bos = f.opt_token_id("bos_token_id")) c.bos_token_id = bos;
    if (auto eos = f.opt_token_ids("eos_token_id")) c.eos_token_ids = *eos;
  }
  return c;
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
  return num_experts > 0 && (layer + 1) % decoder_sparse_step == 0 &&
         std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) == mlp_only_layers.end();
}

int64_t ModelConfig::dense_intermediate_size() const {
  for (int64_t i = 0; i < num_layers; ++i)
    if (!is_moe_layer(i)) return intermediate_size;
  return 0;
}

void ModelConfig::validate(std::string_view name) const {
  auto fail = [&](const std::string& what) { throw Error(std::string(name) + ": " + what); };
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_hidden_layers", num_layers},
      {"num_attention_heads", num_heads},
      {"num_key_value_heads", num_kv_heads},
      {"head_dim", head_dim},
      {"max_position_embeddings", max_position_embeddings},
  };
  for (const auto& [field, value] : sizes) {
    if (value <= 0) fail(std::string(field) + " must be positive, not " + std::to_string(value));
    if (value > kMaxConfigSize)
      fail(std::string(field) + " " + std::to_string(value) + " is absurdly large");
  }
  if (num_heads % num_kv_heads != 0)
    fail("num_key_value_heads " + std::to_string(num_kv_heads) +
         " does not divide num_attention_heads " + std::to_string(num_heads));
  if (num_kv_heads > num_heads)
    fail("num_key_value_heads " + std::to_string(num_kv_heads) + " exceeds num_attention_heads " +
         std::to_string(num_heads));
  if (head_dim % 2 != 0)
    fail("head_dim " + std::to_string(head_dim) + " is odd; RoPE rotates pairs of dimensions");
  if (q_dim() > kMaxConfigSize) fail("num_attention_heads × head_dim is absurdly large");
  if (!has_experts() && num_experts != 0)
    fail(std::string(model_arch_name(arch)) + " has no experts, yet " +
         std::to_string(num_experts) + " are configured");
  if ((arch == ModelArch::Qwen2Moe) != (shared_expert_intermediate_size != 0))
    fail(arch == ModelArch::Qwen2Moe
             ? "shared_expert_intermediate_size must be positive, not " +
                   std::to_string(shared_expert_intermediate_size)
             : std::string(model_arch_name(arch)) + " has no shared expert, yet one is configured");
  if (shared_expert_intermediate_size > kMaxConfigSize)
    fail("shared_expert_intermediate_size " + std::to_string(shared_expert_intermediate_size) +
         " is absurdly large");
  if (has_experts()) {
    // Bounded so that a corrupt file cannot make the loader build billions of expert views.
    constexpr int64_t kMaxExperts = 1 << 16;
    if (num_experts <= 0 || num_experts > kMaxExperts)
      fail("num_experts must be in 1.." + std::to_string(kMaxExperts) + ", not " +
           std::to_string(num_experts));
    if (num_experts_per_tok <= 0 || num_experts_per_tok > num_experts)
      fail("num_experts_per_tok must be in 1..num_experts (" + std::to_string(num_experts) +
           "), not " + std::to_string(num_experts_per_tok));
    if (moe_intermediate_size <= 0 || moe_intermediate_size > kMaxConfigSize)
      fail("moe_intermediate_size must be positive, not " + std::to_string(moe_intermediate_size));
    if (decoder_sparse_step <= 0 || decoder_sparse_step > kMaxConfigSize)
      fail("decoder_sparse_step must be positive, not " + std::to_string(decoder_sparse_step));
  }
  if (!(embedding_scale > 0) || !std::isfinite(embedding_scale) || !(attention_scale >= 0) ||
      !std::isfinite(attention_scale) || !(rope_local_theta >= 0) ||
      !std::isfinite(rope_local_theta))
    fail("embedding_scale, attention_scale and rope_local_theta must be finite and positive");
  if (!(swiglu_limit >= 0) || !std::isfinite(swiglu_limit))
    fail("swiglu_limit must be a non-negative number, not " + std::to_string(swiglu_limit));
  if (!has_experts() && (expert_bias || swiglu_limit != 0))
    fail(std::string(model_arch_name(arch)) + " has no experts, yet expert biases are configured");
  if (!sliding_layers.empty() && static_cast<int64_t>(sliding_layers.size()) != num_layers)
    fail("sliding_layers lists " + std::to_string(sliding_layers.size()) + " layers, not " +
         std::to_string(num_layers));
  if (has_sliding_window() && (sliding_window <= 0 || sliding_window > kMaxConfigSize))
    fail("sliding_window must be positive, not " + std::to_string(sliding_window));
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps))
    fail("rms_norm_eps must be a positive number, not " + std::to_string(rms_norm_eps));
  if (!(rope_theta > 0) || !std::isfinite(rope_theta))
    fail("rope_theta must be a positive number, not " + std::to_string(rope_theta));
  const RopeScaling& rs = rope_scaling;
  if (rs.type != RopeScalingType::None) {
    if (!(rs.factor > 0) || !std::isfinite(rs.factor))
      fail("rope scaling factor must be positive, not " + std::to_string(rs.factor));
    if (rs.original_max_position_embeddings < 0)
      fail("rope scaling original_max_position_embeddings must not be negative");
  }
  if (rs.type == RopeScalingType::Yarn &&
      (rs.original_max_position_embeddings <= 0 || !(rs.beta_fast > 0) || !(rs.beta_slow > 0) ||
       !(rs.attention_factor > 0) || !std::isfinite(rs.attention_factor) ||
       !std::isfinite(rs.beta_fast) || !std::isfinite(rs.beta_slow)))
    fail(
        "yarn rope scaling needs a positive original_max_position_embeddings, beta_fast, "
        "beta_slow and attention_factor");
  if (rs.type == RopeScalingType::Llama3) {
    if (rs.original_max_position_embeddings <= 0)
      fail("llama3 rope scaling needs a positive original_max_position_embeddings");
    if (!(rs.low_freq_factor > 0) || !(rs.high_freq_factor > rs.low_freq_factor) ||
        !std::isfinite(rs.high_freq_factor))
      fail("llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor (got " +
           std::to_string(rs.low_freq_factor) + ", " + std::to_string(rs.high_freq_factor) + ")");
  }
}

}  // namespace tern
