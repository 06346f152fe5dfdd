// The weight side of a plan: tensor lists from a file or from a config, and their sums.
#include "tern/plan/weight_plan.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "tern/core/error.h"
#include "tern/models/weight_loader.h"

namespace tern::plan {
namespace {

uint64_t bytes_of(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  const std::optional<uint64_t> bytes = dtype_bytes(dtype, n);
  if (!bytes)
    throw Error("plan: tensor '" + name + "' of " + std::to_string(n) + " elements is not whole " +
                std::string(dtype_name(dtype)) + " blocks");
  return *bytes;
}

PlannedTensor tensor(std::string name, DType dtype, std::vector<int64_t> shape) {
  const uint64_t bytes = bytes_of(name, dtype, shape);
  return {std::move(name), dtype, std::move(shape), bytes};
}

// "12.rest" → 12 and "rest"; nullopt without a leading number and a dot.
std::optional<std::pair<int64_t, std::string_view>> layer_prefix(std::string_view s) {
  int64_t layer = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), layer);
  if (ec != std::errc() || end == s.data() || end == s.data() + s.size() || *end != '.')
    return std::nullopt;
  return std::pair{layer, s.substr(static_cast<size_t>(end - s.data()) + 1)};
}

// q, k, v, o, gate, up, down: the matrices of a layer's list (layer_matrices).
bool is_layer_matrix(TensorRole r) { return r <= TensorRole::Down; }

}  // namespace

uint64_t PlannedTensor::elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

TensorPart tensor_part(std::string_view name) {
  if (name == "token_embd.weight" || name == "model.embed_tokens.weight")
    return {TensorRole::TokenEmbedding, -1};
  if (name == "output.weight" || name == "lm_head.weight") return {TensorRole::Output, -1};
  struct Suffix {
    std::string_view gguf, hf;
    TensorRole role;
    bool experts = false;
    bool shared_expert = false;
  };
  static constexpr Suffix kSuffixes[] = {
      {"ffn_gate_inp.weight", "mlp.gate.weight", TensorRole::Router},
      {"ffn_gate_exps.weight", "", TensorRole::Gate, true},
      {"ffn_up_exps.weight", "", TensorRole::Up, true},
      {"ffn_down_exps.weight", "", TensorRole::Down, true},
      // gpt-oss's experts' biases: a token reads its experts' rows only.
      {"ffn_gate_exps.bias", "", TensorRole::Other, true},
      {"ffn_up_exps.bias", "", TensorRole::Other, true},
      {"ffn_down_exps.bias", "", TensorRole::Other, true},
      {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight", TensorRole::Gate, false,
       true},
      {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight", TensorRole::Up, false, true},
      {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight", TensorRole::Down, false,
       true},
      {"attn_q.weight", "self_attn.q_proj.weight", TensorRole::Q},
      {"attn_k.weight", "self_attn.k_proj.weight", TensorRole::K},
      {"attn_v.weight", "self_attn.v_proj.weight", TensorRole::V},
      {"attn_output.weight", "self_attn.o_proj.weight", TensorRole::O},
      {"ffn_gate.weight", "mlp.gate_proj.weight", TensorRole::Gate},
      {"ffn_up.weight", "mlp.up_proj.weight", TensorRole::Up},
      {"ffn_down.weight", "mlp.down_proj.weight", TensorRole::Down},
  };
  for (const auto& [prefix, hf] : {std::pair{std::string_view("blk."), false},
                                   std::pair{std::string_view("model.layers."), true}}) {
    if (!name.starts_with(prefix)) continue;
    const auto split = layer_prefix(name.substr(prefix.size()));
    if (!split) return {};
    const std::string_view rest = split->second;
    if (hf && rest.starts_with("mlp.experts.")) {
      // gpt-oss stacks its experts (mlp.experts.gate_up_proj_blocks in OpenAI's MXFP4, or
      // unquantized mlp.experts.gate_up_proj, inputs first), which are no layer matrix tern
      // multiplies as stored.
      if (rest.starts_with("mlp.experts.gate_up_proj") || rest.starts_with("mlp.experts.down_proj"))
        return {TensorRole::Other, split->first, true};
      // Hugging Face names each expert's own: mlp.experts.N.gate_proj.weight.
      const auto expert = layer_prefix(rest.substr(std::string_view("mlp.experts.").size()));
      if (!expert) return {};
      for (const auto& [suffix, role] : {std::pair{"gate_proj.weight", TensorRole::Gate},
                                         std::pair{"up_proj.weight", TensorRole::Up},
                                         std::pair{"down_proj.weight", TensorRole::Down}})
        if (expert->second == suffix) return {role, split->first, true};
      return {};
    }
    for (const Suffix& s : kSuffixes) {
      const std::string_view own = hf ? s.hf : s.gguf;
      if (!own.empty() && rest == own) return {s.role, split->first, s.experts, s.shared_expert};
    }
    return {};
  }
  return {};
}

uint64_t WeightPlan::total_bytes() const {
  uint64_t total = 0;
  for (const PlannedTensor& t : tensors) total += t.bytes;
  return total;
}

uint64_t WeightPlan::parameters() const {
  uint64_t total = 0;
  for (const PlannedTensor& t : tensors) total += t.elements();
  return total;
}

std::vector<TypeTotal> WeightPlan::by_type() const {
  std::map<DType, TypeTotal> totals;
  for (const PlannedTensor& t : tensors) {
    TypeTotal& s = totals[t.dtype];
    s.dtype = t.dtype;
    ++s.tensors;
    s.elements += t.elements();
    s.bytes += t.bytes;
  }
  std::vector<TypeTotal> out;
  for (const auto& [_, s] : totals) out.push_back(s);
  std::stable_sort(out.begin(), out.end(),
                   [](const TypeTotal& a, const TypeTotal& b) { return a.bytes > b.bytes; });
  return out;
}

uint64_t WeightPlan::bytes_read_per_token() const {
  uint64_t total = 0;
  for (const PlannedTensor& t : tensors) {
    const TensorRole role = tensor_part(t.name).role;
    if (role == TensorRole::TokenEmbedding && !tied_embeddings) continue;  // one row of it
    if (role == TensorRole::Output && tied_embeddings) continue;           // a copy tern ignores
    if (tensor_part(t.name).experts && num_experts > 0) {
      total +=
          t.bytes * static_cast<uint64_t>(experts_per_token) / static_cast<uint64_t>(num_experts);
      continue;
    }
    total += t.bytes;
  }
  return total;
}

uint64_t WeightPlan::repacked_bytes(const Device& device) const {
  if (!tied_embeddings) return 0;
  for (const PlannedTensor& t : tensors) {
    if (tensor_part(t.name).role != TensorRole::TokenEmbedding || t.shape.size() != 2) continue;
    return device.prepared_copy_bytes(MatrixShape{t.dtype, t.shape[0], t.shape[1]});
  }
  return 0;
}

std::vector<std::vector<MatrixShape>> WeightPlan::layer_matrices() const {
  std::vector<std::vector<MatrixShape>> layers;
  for (const PlannedTensor& t : tensors) {
    const TensorPart part = tensor_part(t.name);
    if (part.layer < 0 || !is_layer_matrix(part.role)) continue;
    // A stacked experts' tensor [n, rows, cols] stands for one expert's matrix.
    const size_t dims = t.shape.size();
    if (dims != 2 && !(dims == 3 && part.experts)) continue;
    if (static_cast<size_t>(part.layer) >= layers.size())
      layers.resize(static_cast<size_t>(part.layer) + 1);
    std::vector<MatrixShape>& l = layers[static_cast<size_t>(part.layer)];
    l.resize(std::max<size_t>(l.size(), 7));
    const MatrixShape shape{t.dtype, t.shape[dims - 2], t.shape[dims - 1]};
    if (part.shared_expert)
      l.push_back(shape);
    else
      l[static_cast<size_t>(part.role)] = shape;
  }
  return layers;
}

MatrixShape WeightPlan::lm_head() const {
  const TensorRole wanted = tied_embeddings ? TensorRole::TokenEmbedding : TensorRole::Output;
  for (const PlannedTensor& t : tensors)
    if (tensor_part(t.name).role == wanted && t.shape.size() == 2)
      return {t.dtype, t.shape[0], t.shape[1]};
  return {};
}

std::vector<PlannedTensor> model_tensors(const ModelConfig& c, const QuantRecipe& recipe,
                                         DType vector_dtype) {
  const RecipeModel model = RecipeModel::of(c);
  std::vector<PlannedTensor> out;
  auto matrix = [&](std::string name, int64_t layer, int64_t rows, int64_t cols) {
    const DType dtype = recipe.weight_type(model, {name, layer, cols});
    out.push_back(tensor(std::move(name), dtype, {rows, cols}));
  };
  auto experts = [&](std::string name, int64_t layer, int64_t rows, int64_t cols) {
    const DType dtype = recipe.weight_type(model, {name, layer, cols, c.num_experts});
    out.push_back(tensor(std::move(name), dtype, {c.num_experts, rows, cols}));
  };
  auto vector = [&](std::string name, int64_t n) {
    out.push_back(tensor(std::move(name), vector_dtype, {n}));
  };
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), ff = c.intermediate_size;
  matrix("token_embd.weight", -1, c.vocab_size, h);
  if (c.rope_scaling.type == RopeScalingType::Llama3)
    out.push_back(tensor("rope_freqs.weight", DType::F32, {c.head_dim / 2}));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto n = [i](const char* what) { return gguf_tensor_name(i, what); };
    vector(n("attn_norm.weight"), h);
    matrix(n("attn_q.weight"), i, q, h);
    matrix(n("attn_k.weight"), i, kv, h);
    matrix(n("attn_v.weight"), i, kv, h);
    matrix(n("attn_output.weight"), i, h, q);
    if (c.attention_bias) {
      vector(n("attn_q.bias"), q);
      vector(n("attn_k.bias"), kv);
      vector(n("attn_v.bias"), kv);
    }
    if (c.attention_out_bias) vector(n("attn_output.bias"), h);
    if (c.qk_norm) {
      vector(n("attn_q_norm.weight"), c.head_dim);
      vector(n("attn_k_norm.weight"), c.head_dim);
    }
    if (c.attention_sinks) vector(n("attn_sinks.weight"), c.num_heads);
    vector(n(c.arch == ModelArch::GptOss ? "post_attention_norm.weight" : "ffn_norm.weight"), h);
    if (c.post_norms) {
      vector(n("post_attention_norm.weight"), h);
      vector(n("post_ffw_norm.weight"), h);
    }
    if (c.is_moe_layer(i)) {
      const int64_t ffe = c.moe_intermediate_size, e = c.num_experts;
      matrix(n("ffn_gate_inp.weight"), i, e, h);
      experts(n("ffn_gate_exps.weight"), i, ffe, h);
      experts(n("ffn_up_exps.weight"), i, ffe, h);
      experts(n("ffn_down_exps.weight"), i, h, ffe);
      if (c.expert_bias) {
        vector(n("ffn_gate_inp.bias"), e);
        out.push_back(tensor(n("ffn_gate_exps.bias"), vector_dtype, {e, ffe}));
        out.push_back(tensor(n("ffn_up_exps.bias"), vector_dtype, {e, ffe}));
        out.push_back(tensor(n("ffn_down_exps.bias"), vector_dtype, {e, h}));
      }
      if (const int64_t sff = c.shared_expert_intermediate_size; sff > 0) {
        vector(n("ffn_gate_inp_shexp.weight"), h);
        matrix(n("ffn_gate_shexp.weight"), i, sff, h);
        matrix(n("ffn_up_shexp.weight"), i, sff, h);
        matrix(n("ffn_down_shexp.weight"), i, h, sff);
      }
      continue;
    }
    matrix(n("ffn_gate.weight"), i, ff, h);
    matrix(n("ffn_up.weight"), i, ff, h);
    matrix(n("ffn_down.weight"), i, h, ff);
    if (c.mlp_bias) {
      vector(n("ffn_gate.bias"), ff);
      vector(n("ffn_up.bias"), ff);
      vector(n("ffn_down.bias"), h);
    }
  }
  vector("output_norm.weight", h);
  if (!c.tie_word_embeddings) matrix("output.weight", -1, c.vocab_size, h);
  return out;
}

WeightPlan plan_file_weights(const ModelConfig& config, const std::vector<TensorInfo>& tensors) {
  WeightPlan p;
  p.types = "the file's";
  p.tied_embeddings = config.tie_word_embeddings;
  p.num_experts = config.num_experts;
  p.experts_per_token = config.num_experts_per_tok;
  for (const TensorInfo& t : tensors) {
    const uint64_t bytes = bytes_of(t.name, t.dtype, t.shape);
    if (bytes != t.nbytes)
      throw Error("plan: tensor '" + t.name + "' holds " + std::to_string(t.nbytes) +
                  " bytes, its type and shape " + std::to_string(bytes));
    p.tensors.push_back({t.name, t.dtype, t.shape, t.nbytes});
  }
  return p;
}

WeightPlan plan_recipe_weights(const ModelConfig& config, const QuantRecipe& recipe,
                               const std::vector<TensorInfo>& file_tensors) {
  WeightPlan p;
  p.types = "--weight-type " + recipe.name();
  p.tied_embeddings = config.tie_word_embeddings;
  p.num_experts = config.num_experts;
  p.experts_per_token = config.num_experts_per_tok;
  p.tensors = model_tensors(config, recipe);
  const bool has_freqs =
      std::any_of(p.tensors.begin(), p.tensors.end(),
                  [](const PlannedTensor& t) { return t.name == "rope_freqs.weight"; });
  for (const TensorInfo& t : file_tensors)
    if (t.name == "rope_freqs.weight" && !has_freqs)
      p.tensors.insert(p.tensors.begin() + 1, tensor(t.name, DType::F32, t.shape));
  return p;
}

WeightPlan plan_checkpoint_weights(const ModelConfig& config, DType dtype) {
  WeightPlan p;
  p.types = "config.json's torch_dtype (" + std::string(dtype_name(dtype)) + ")";
  p.tied_embeddings = config.tie_word_embeddings;
  p.num_experts = config.num_experts;
  p.experts_per_token = config.num_experts_per_tok;
  for (PlannedTensor& t : model_tensors(config, QuantRecipe::uniform(dtype), dtype))
    if (t.name != "rope_freqs.weight")
      p.tensors.push_back(std::move(t));  // tern's, not the checkpoint's
  return p;
}

}  // namespace tern::plan
