// Binding GGUF and safetensors tensors to ModelWeights: names per format, shapes checked
// against the config, matrices used in place.
#include "tern/models/weight_loader.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string_view>

#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/gguf.h"
#include "tern/formats/safetensors.h"
#include "tern/models/checkpoint_weights.h"
#include "tern/models/openai_experts.h"
#include "tern/models/tensor_names.h"

namespace tern {

std::string gguf_tensor_name(int64_t layer, std::string_view what) {
  return "blk." + std::to_string(layer) + "." + std::string(what);
}

namespace {

// The file types a matrix may have: those the matmul kernels multiply.
constexpr DType kMatmulTypes[] = {
    DType::F32,     DType::F16,    DType::BF16,   DType::Q4_0,  DType::Q4_1,    DType::Q5_0,
    DType::Q5_1,    DType::Q8_0,   DType::Q2_K,   DType::Q3_K,  DType::Q4_K,    DType::Q5_K,
    DType::Q6_K,    DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4, DType::IQ3_XXS, DType::IQ3_S,
    DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,  DType::IQ1_S, DType::IQ1_M};

bool is_matmul_type(DType t) {
  for (DType m : kMatmulTypes)
    if (m == t) return true;
  return false;
}

std::string matmul_type_names() {
  std::string names;
  for (DType m : kMatmulTypes) names += (names.empty() ? "" : ", ") + std::string(dtype_name(m));
  return names;
}

// Finds tensors by name in one file (or checkpoint) and checks them.
class Binder {
 public:
  using Find = FindTensor;
  // `quantization`: how the checkpoint's quantized modules are stored (nullptr: none are).
  Binder(std::string source, Find find, ModelWeights& w,
         const CheckpointQuantization* quantization = nullptr)
      : source_(std::move(source)), find_(std::move(find)), w_(w), quantization_(quantization) {}

  const TensorInfo* optional(const std::string& name) const { return find_(name); }

  const TensorInfo& required(const std::string& name) const {
    const TensorInfo* t = find_(name);
    if (t == nullptr) throw Error(source_ + ": tensor '" + name + "' is missing");
    return *t;
  }

  void check_shape(const TensorInfo& t, std::vector<int64_t> expected, const char* what) const {
    if (t.shape != expected)
      throw Error(source_ + ": tensor '" + t.name + "' has shape " + shape_text(t.shape) +
                  ", expected " + shape_text(expected) + " (" + what + " from the config)");
  }

  WeightMatrix matrix(const TensorInfo& t, int64_t rows, int64_t cols, const char* what) const {
    check_shape(t, {rows, cols}, what);
    return rows_of(t, rows, cols);
  }

  // The `n` experts' matrices of a stacked tensor [n, rows, cols]: views one after another.
  std::vector<WeightMatrix> stacked(const TensorInfo& t, int64_t n, int64_t rows, int64_t cols,
                                    const char* what) const {
    check_shape(t, {n, rows, cols}, what);
    return split_experts(rows_of(t, n * rows, cols), n);
  }

  // A matrix of `rows` rows of `cols` elements starting at t.data, once its type is known to
  // be one the kernels multiply in whole blocks.
  WeightMatrix rows_of(const TensorInfo& t, int64_t rows, int64_t cols) const {
    if (!is_matmul_type(t.dtype))
      throw Error(source_ + ": tensor '" + t.name + "' has type " +
                  std::string(dtype_name(t.dtype)) + ", which tern cannot multiply (" +
                  matmul_type_names() + ")");
    auto row_bytes = dtype_bytes(t.dtype, static_cast<uint64_t>(cols));
    if (!row_bytes)
      throw Error(source_ + ": tensor '" + t.name + "' rows of " + std::to_string(cols) +
                  " elements are not whole " + std::string(dtype_name(t.dtype)) + " blocks");
    return {t.dtype, rows, cols, t.data, static_cast<size_t>(*row_bytes)};
  }

  // A quantized checkpoint's module (`name` less ".weight") is repacked from its own tensors.
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols, const char* what) const {
    if (quantization_ != nullptr && name.ends_with(".weight")) {
      const std::string module = name.substr(0, name.size() - std::string_view(".weight").size());
      if (std::optional<WeightMatrix> m = read_quantized_matrix(*quantization_, find_, source_,
                                                                module, rows, cols, w_, orders_))
        return *m;
    }
    return matrix(required(name), rows, cols, what);
  }

  // A vector of `n` floats: in place when F32, else widened once into owned storage.
  std::span<const float> vector(const TensorInfo& t, int64_t n, const char* what) const {
    check_shape(t, {n}, what);
    const bool aligned = reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0;
    if (t.dtype == DType::F32 && aligned)
      return {reinterpret_cast<const float*>(t.data), static_cast<size_t>(n)};
    if (t.dtype == DType::F32) {  // a safetensors offset need not be a multiple of 4
      std::span<float> out = w_.own_floats(static_cast<size_t>(n));
      std::memcpy(out.data(), t.data, out.size_bytes());
      return out;
    }
    if (t.dtype != DType::F16 && t.dtype != DType::BF16)
      throw Error(source_ + ": tensor '" + t.name + "' has type " +
                  std::string(dtype_name(t.dtype)) + "; norms and biases must be F32, F16 or BF16");
    std::span<float> out = w_.own_floats(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[static_cast<size_t>(i)] = t.dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    return out;
  }

  std::span<const float> vector(const std::string& name, int64_t n, const char* what) const {
    return vector(required(name), n, what);
  }

  // A norm's weight plus `offset` (TensorNames::norm_offset), in owned storage when nonzero.
  std::span<const float> norm(const std::string& name, int64_t n, const char* what,
                              float offset) const {
    const std::span<const float> v = vector(name, n, what);
    if (offset == 0) return v;
    std::span<float> out = w_.own_floats(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i] + offset;
    return out;
  }

  // `n` vectors of `width` stacked, [n, width], as one of n · width floats.
  std::span<const float> stacked_vector(const std::string& name, int64_t n, int64_t width,
                                        const char* what) const {
    TensorInfo t = required(name);
    check_shape(t, {n, width}, what);
    t.shape = {n * width};
    return vector(t, n * width, what);
  }

  const std::string& source() const { return source_; }
  ModelWeights& weights() const { return w_; }

  // A vector stored as a vector [n] or as a matrix of one row [1, n] (a Linear to one output).
  std::span<const float> row_vector(const std::string& name, int64_t n, const char* what) const {
    TensorInfo t = required(name);
    if (t.shape == std::vector<int64_t>{1, n}) t.shape = {n};
    return vector(t, n, what);
  }

  std::span<const float> optional_vector(const std::string& name, int64_t n, const char* what,
                                         bool required_by_config) const {
    const TensorInfo* t = find_(name);
    if (t == nullptr) {
      if (required_by_config) throw Error(source_ + ": tensor '" + name + "' is missing");
      return {};
    }
    return vector(*t, n, what);
  }

 private:
  std::string source_;
  Find find_;
  ModelWeights& w_;
  const CheckpointQuantization* quantization_;
  mutable InputOrders orders_;
};

// gpt-oss's Hugging Face experts: OpenAI's MXFP4 tensors, gate and up interleaved in one
// (openai_experts.h), converted to ggml's blocks, gate and up apart; or the BF16 checkpoints'
// unquantized tensors (inputs first), transposed into rows of their type; the biases likewise.
void bind_openai_experts(const Binder& b, const TensorNames& n, const ModelConfig& c, int64_t i,
                         MixtureOfExperts& moe) {
  const int64_t h = c.hidden_size, ff = c.moe_intermediate_size, e = c.num_experts;
  auto name = [&](const char* prefix, const char* suffix) {
    return n.layer(i, std::string(prefix) + suffix);
  };
  ModelWeights& w = b.weights();
  try {
    if (b.optional(name(n.fused_gate_up, "_blocks")) == nullptr &&
        b.optional(name(n.fused_gate_up, "")) != nullptr) {
      const TensorInfo &gate_up = b.required(name(n.fused_gate_up, "")),
                       &down = b.required(name(n.fused_down, ""));
      moe.gate = split_experts(openai_transposed_rows(gate_up, e, 2 * ff, h, 0, 2, w), e);
      moe.up = split_experts(openai_transposed_rows(gate_up, e, 2 * ff, h, 1, 2, w), e);
      moe.down = split_experts(openai_transposed_rows(down, e, h, ff, 0, 1, w), e);
    } else {
      const TensorInfo &gate_up = b.required(name(n.fused_gate_up, "_blocks")),
                       &gate_up_scales = b.required(name(n.fused_gate_up, "_scales")),
                       &down = b.required(name(n.fused_down, "_blocks")),
                       &down_scales = b.required(name(n.fused_down, "_scales"));
      moe.gate =
          split_experts(openai_mxfp4_rows(gate_up, gate_up_scales, e, 2 * ff, h, 0, 2, w), e);
      moe.up = split_experts(openai_mxfp4_rows(gate_up, gate_up_scales, e, 2 * ff, h, 1, 2, w), e);
      moe.down = split_experts(openai_mxfp4_rows(down, down_scales, e, h, ff, 0, 1, w), e);
    }
  } catch (const Error& x) {
    throw Error(b.source() + ": " + x.what());
  }

  const std::span<const float> gate_up_bias = b.stacked_vector(
      name(n.fused_gate_up, "_bias"), e, 2 * ff, "num_experts × 2·intermediate_size");
  std::span<float> gate_bias = w.own_floats(static_cast<size_t>(e * ff)),
                   up_bias = w.own_floats(static_cast<size_t>(e * ff));
  for (size_t j = 0; j < gate_bias.size(); ++j) {
    gate_bias[j] = gate_up_bias[2 * j];
    up_bias[j] = gate_up_bias[2 * j + 1];
  }
  moe.gate_bias = gate_bias;
  moe.up_bias = up_bias;
  moe.down_bias = b.stacked_vector(name(n.fused_down, "_bias"), e, h, "num_experts × hidden_size");
}

// Layer i's router and experts: stacked tensors (GGUF) or one tensor per expert (Hugging Face).
MixtureOfExperts bind_experts(const Binder& b, const TensorNames& n, const ModelConfig& c,
                              int64_t i) {
  const int64_t h = c.hidden_size, ff = c.moe_intermediate_size, e = c.num_experts;
  MixtureOfExperts moe;
  moe.router = b.matrix(n.layer(i, n.router), e, h, "num_experts × hidden_size");
  moe.top_k = c.num_experts_per_tok;
  moe.normalize_top_k = c.norm_topk_prob;
  moe.swiglu_limit = static_cast<float>(c.swiglu_limit);
  if (c.expert_bias) moe.router_bias = b.vector(n.layer(i, n.router_bias), e, "num_experts");
  if (n.fused_gate_up != nullptr && c.arch == ModelArch::GptOss) {
    bind_openai_experts(b, n, c, i, moe);
    return moe;
  }
  const struct {
    std::vector<WeightMatrix>* into;
    const char* suffix;
    int64_t rows, cols;
    const char* what;
  } parts[] = {{&moe.gate, n.expert_gate, ff, h, "moe_intermediate_size × hidden_size"},
               {&moe.up, n.expert_up, ff, h, "moe_intermediate_size × hidden_size"},
               {&moe.down, n.expert_down, h, ff, "hidden_size × moe_intermediate_size"}};
  for (const auto& p : parts) {
    if (!n.expert) {
      const std::string what = std::string("num_experts × ") + p.what;
      *p.into = b.stacked(b.required(n.layer(i, p.suffix)), e, p.rows, p.cols, what.c_str());
      continue;
    }
    for (int64_t x = 0; x < e; ++x)
      p.into->push_back(b.matrix(n.expert(i, x, p.suffix), p.rows, p.cols, p.what));
  }
  if (c.expert_bias) {
    moe.gate_bias = b.stacked_vector(n.layer(i, n.expert_gate_bias), e, ff,
                                     "num_experts × moe_intermediate_size");
    moe.up_bias = b.stacked_vector(n.layer(i, n.expert_up_bias), e, ff,
                                   "num_experts × moe_intermediate_size");
    moe.down_bias =
        b.stacked_vector(n.layer(i, n.expert_down_bias), e, h, "num_experts × hidden_size");
  }
  if (const int64_t sff = c.shared_expert_intermediate_size; sff > 0) {
    SharedExpert& s = moe.shared.emplace();
    auto name = [&](const char* suffix) { return n.layer(i, suffix); };
    s.gate = b.matrix(name(n.shared_gate), sff, h, "shared_expert_intermediate_size × hidden_size");
    s.up = b.matrix(name(n.shared_up), sff, h, "shared_expert_intermediate_size × hidden_size");
    s.down = b.matrix(name(n.shared_down), h, sff, "hidden_size × shared_expert_intermediate_size");
    s.gate_weight = b.row_vector(name(n.shared_gate_weight), h, "hidden_size");
  }
  return moe;
}

void bind_all(const Binder& b, const TensorNames& n, const ModelConfig& c, ModelWeights& w) {
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), ff = c.intermediate_size;
  w.token_embedding = b.matrix(n.embedding, c.vocab_size, h, "vocab_size × hidden_size");
  w.output_norm = b.norm(n.output_norm, h, "hidden_size", n.norm_offset);
  // Tied: the embedding is the head even when a checkpoint also stores a copy of it.
  w.tied_embeddings = c.tie_word_embeddings;
  w.lm_head = c.tie_word_embeddings
                  ? w.token_embedding
                  : b.matrix(n.lm_head, c.vocab_size, h, "vocab_size × hidden_size");

  // Grown layer by layer: a file claiming billions of layers fails at its first missing tensor,
  // not by allocating them all.
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers.emplace_back();
    auto name = [&](const char* s) { return n.layer(i, s); };
    auto norm = [&](const char* s, int64_t size, const char* what) {
      return b.norm(name(s), size, what, n.norm_offset);
    };
    l.attn_norm = norm(n.attn_norm, h, "hidden_size");
    l.wq = b.matrix(name(n.q), q, h, "num_heads·head_dim × hidden_size");
    l.wk = b.matrix(name(n.k), kv, h, "num_kv_heads·head_dim × hidden_size");
    l.wv = b.matrix(name(n.v), kv, h, "num_kv_heads·head_dim × hidden_size");
    l.wo = b.matrix(name(n.o), h, q, "hidden_size × num_heads·head_dim");
    l.bq = b.optional_vector(name(n.bq), q, "num_heads·head_dim", c.attention_bias);
    l.bk = b.optional_vector(name(n.bk), kv, "num_kv_heads·head_dim", c.attention_bias);
    l.bv = b.optional_vector(name(n.bv), kv, "num_kv_heads·head_dim", c.attention_bias);
    l.bo = b.optional_vector(name(n.bo), h, "hidden_size", c.attention_out_bias);
    if (c.qk_norm) {
      l.q_norm = norm(n.q_norm, c.head_dim, "head_dim");
      l.k_norm = norm(n.k_norm, c.head_dim, "head_dim");
    }
    if (c.attention_sinks)
      l.attn_sinks = b.vector(name(n.attn_sinks), c.num_heads, "num_attention_heads");
    l.ffn_norm = norm(n.ffn_norm, h, "hidden_size");
    if (c.post_norms) {
      l.attn_post_norm = norm(n.attn_post_norm, h, "hidden_size");
      l.ffn_post_norm = norm(n.ffn_post_norm, h, "hidden_size");
    }
    if (c.is_moe_layer(i)) {
      l.moe = bind_experts(b, n, c, i);
      continue;
    }
    l.w_gate = b.matrix(name(n.gate), ff, h, "intermediate_size × hidden_size");
    l.w_up = b.matrix(name(n.up), ff, h, "intermediate_size × hidden_size");
    l.w_down = b.matrix(name(n.down), h, ff, "hidden_size × intermediate_size");
    l.b_gate = b.optional_vector(name(n.b_gate), ff, "intermediate_size", c.mlp_bias);
    l.b_up = b.optional_vector(name(n.b_up), ff, "intermediate_size", c.mlp_bias);
    l.b_down = b.optional_vector(name(n.b_down), h, "hidden_size", c.mlp_bias);
  }
}

}  // namespace

ModelWeights load_gguf_weights(const GgufFile& gguf, const ModelConfig& config) {
  ModelWeights w;
  w.keep_mapping(gguf.mapped_file());
  Binder b(
      gguf.path(), [&](std::string_view name) { return gguf.find_tensor(name); }, w);
  bind_all(b, gguf_tensor_names(config.arch), config, w);
  // llama.cpp's converter permutes llama's q/k rows to pair adjacent elements; qwen is
  // converted as is (neox).
  w.rope_layout = config.arch == ModelArch::Llama ? RopeLayout::Interleaved : RopeLayout::Neox;
  if (const TensorInfo* f = gguf.find_tensor("rope_freqs.weight"))
    w.rope_freq_factors = b.vector(*f, config.head_dim / 2, "head_dim / 2");
  // Kept so that saving the weights again names them as the file did (a Q4_K_M stays Q4_K_M).
  if (const std::optional<int64_t> t = gguf.get_int("general.file_type"); t && *t >= 0 && *t < 1024)
    w.file_type = file_type_from_gguf(static_cast<uint32_t>(*t));
  return w;
}

ModelWeights load_safetensors_weights(const SafetensorsModel& model, const ModelConfig& config,
                                      const CheckpointQuantization* quantization) {
  ModelWeights w;
  for (const SafetensorsFile& shard : model.shards())
    w.keep_alive(std::make_shared<SafetensorsFile>(shard));  // copies share the mapping
  Binder b(
      model.path(), [&](std::string_view name) { return model.find_tensor(name); }, w,
      quantization);
  bind_all(b, hf_tensor_names(config.arch), config, w);
  w.rope_layout = RopeLayout::Neox;  // transformers' rotate_half, for every architecture
  return w;
}

}  // namespace tern
