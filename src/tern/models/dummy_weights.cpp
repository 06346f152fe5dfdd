// Weights made here rather than read: `--load-format dummy` (random, of the config's shapes)
// and requantized copies of loaded weights. Rows are built in parallel.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "tern/core/error.h"
#include "tern/kernels/cpu/quants/quantize.h"
#include "tern/models/model_weights.h"
#include "tern/quant/block_code.h"
#include "tern/quant/gptq.h"
#include "tern/quant/importance_matrix.h"
#include "tern/quant/quant_recipe.h"
#include "tern/quant/weight_quantizer.h"

namespace tern {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Allocates a [rows, cols] matrix of the type `recipe` gives the tensor `name` (of layer
// `layer`, -1 outside the blocks) and fills each row from `make_row(i, f32_row)`, converting
// it. Rows are independent, so the result never depends on the threads.
template <typename MakeRow>
WeightMatrix build_matrix(ModelWeights& w, const QuantRecipe& recipe, const RecipeModel& model,
                          const std::string& name, int64_t layer, int64_t rows, int64_t cols,
                          MakeRow make_row) {
  const DType dtype = recipe.weight_type(model, {name, layer, cols});
  const auto row_bytes = dtype_bytes(dtype, static_cast<uint64_t>(cols));
  std::span<std::byte> data =
      w.own_bytes(static_cast<size_t>(*row_bytes) * static_cast<size_t>(rows));
  const cpu::QuantizeFn quantize = dtype == DType::F32 ? nullptr : cpu::quantize_fn(dtype);
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      make_row(i, row.data());
      std::byte* dst = data.data() + static_cast<size_t>(i) * *row_bytes;
      if (quantize == nullptr)
        std::memcpy(dst, row.data(), row.size() * sizeof(float));
      else
        quantize(row.data(), dst, cols);
    }
  }
  return {dtype, rows, cols, data.data(), static_cast<size_t>(*row_bytes)};
}

std::span<const float> constant_vector(ModelWeights& w, int64_t n, float value) {
  std::span<float> v = w.own_floats(static_cast<size_t>(n));
  for (float& x : v) x = value;
  return v;
}

std::span<const float> copy_vector(ModelWeights& w, std::span<const float> src) {
  if (src.empty()) return {};
  std::span<float> v = w.own_floats(src.size());
  std::memcpy(v.data(), src.data(), src.size_bytes());
  return v;
}

// `m` as `dtype` through f32, by the weight quantizers with the importances of `name` when
// `imatrix` has them (by GPTQ when it has the input's second moments too); copied when it
// already is `dtype`. An act-order matrix's columns are put back in the inputs' order.
WeightMatrix requantized_matrix(ModelWeights& w, const WeightMatrix& m, DType dtype,
                                const ImportanceMatrix* imatrix, const std::string& name) {
  const auto row_bytes = static_cast<size_t>(*dtype_bytes(dtype, static_cast<uint64_t>(m.cols)));
  std::span<std::byte> data = w.own_bytes(row_bytes * static_cast<size_t>(m.rows));
  if (m.dtype == dtype && m.input_order == nullptr) {
    for (int64_t i = 0; i < m.rows; ++i)
      std::memcpy(data.data() + static_cast<size_t>(i) * row_bytes, m.row(i), row_bytes);
    return {dtype, m.rows, m.cols, data.data(), row_bytes};
  }
  const std::vector<float> importance =
      imatrix != nullptr ? imatrix->importance(name) : std::vector<float>{};
  const float* imp = importance.empty() ? nullptr : importance.data();
  // With the input's whole second-moment matrix, GPTQ (which needs a type of blocks).
  std::optional<quant::GptqFactor> gptq;
  if (imatrix != nullptr && quant::has_block_code(dtype)) {
    const std::vector<float> moments = imatrix->second_moments(name);
    if (!moments.empty()) gptq = quant::GptqFactor::of(moments, m.cols);
  }
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(m.cols)), gathered;
#pragma omp for schedule(dynamic, 8)
    for (int64_t i = 0; i < m.rows; ++i) {
      if (m.input_order == nullptr) {
        cpu::dequantize_row(m.dtype, m.row(i), row.data(), m.cols);
      } else {  // an act-order checkpoint's columns back in the inputs' order
        gathered.resize(row.size());
        cpu::dequantize_row(m.dtype, m.row(i), gathered.data(), m.cols);
        for (int64_t j = 0; j < m.cols; ++j)
          row[static_cast<size_t>(m.input_order[j])] = gathered[j];
      }
      std::byte* out = data.data() + static_cast<size_t>(i) * row_bytes;
      if (gptq)
        quant::quantize_row_gptq(dtype, row.data(), out, m.cols, *gptq);
      else
        quant::quantize_weight_row(dtype, row.data(), out, m.cols, imp);
    }
  }
  return {dtype, m.rows, m.cols, data.data(), row_bytes};
}

}  // namespace

ModelWeights make_dummy_weights(const ModelConfig& c, const QuantRecipe& recipe, uint64_t seed) {
  ModelWeights w;
  const RecipeModel model = RecipeModel::of(c);
  uint64_t matrix_id = 0;
  // Uniform in ±a has standard deviation a/√3: a = 0.02·√3 gives an initialiser's 0.02.
  const float a = 0.02f * std::sqrt(3.0f);
  // The seed of a matrix is its position in this order, not its type: a mixture and a uniform
  // type draw the same f32 values.
  auto random = [&](const std::string& name, int64_t layer, int64_t rows, int64_t cols) {
    const uint64_t id = ++matrix_id;
    return build_matrix(w, recipe, model, name, layer, rows, cols, [&, id](int64_t i, float* row) {
      uint64_t state = seed * 0x632be59bd9b4e019ull ^ (id << 40) ^ static_cast<uint64_t>(i);
      splitmix64(state);
      for (int64_t j = 0; j + 1 < cols; j += 2) {
        const uint64_t r = splitmix64(state);
        row[j] = a * (static_cast<float>(static_cast<uint32_t>(r) >> 8) * 0x1p-23f - 1.0f);
        row[j + 1] = a * (static_cast<float>(r >> 40) * 0x1p-23f - 1.0f);
      }
      if (cols % 2)
        row[cols - 1] = a * (static_cast<float>(splitmix64(state) >> 40) * 0x1p-23f - 1.0f);
    });
  };
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), ff = c.intermediate_size;
  w.token_embedding = random("token_embd.weight", -1, c.vocab_size, h);
  w.output_norm = constant_vector(w, h, 1.0f);
  w.tied_embeddings = c.tie_word_embeddings;
  w.lm_head = w.tied_embeddings ? w.token_embedding : random("output.weight", -1, c.vocab_size, h);
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    auto n = [i](const char* what) { return gguf_tensor_name(i, what); };
    l.attn_norm = constant_vector(w, h, 1.0f);
    l.wq = random(n("attn_q.weight"), i, q, h);
    l.wk = random(n("attn_k.weight"), i, kv, h);
    l.wv = random(n("attn_v.weight"), i, kv, h);
    l.wo = random(n("attn_output.weight"), i, h, q);
    if (c.attention_bias) {
      l.bq = constant_vector(w, q, 0.0f);
      l.bk = constant_vector(w, kv, 0.0f);
      l.bv = constant_vector(w, kv, 0.0f);
    }
    if (c.attention_out_bias) l.bo = constant_vector(w, h, 0.0f);
    if (c.qk_norm) {
      l.q_norm = constant_vector(w, c.head_dim, 1.0f);
      l.k_norm = constant_vector(w, c.head_dim, 1.0f);
    }
    l.ffn_norm = constant_vector(w, h, 1.0f);
    l.w_gate = random(n("ffn_gate.weight"), i, ff, h);
    l.w_up = random(n("ffn_up.weight"), i, ff, h);
    l.w_down = random(n("ffn_down.weight"), i, h, ff);
    if (c.mlp_bias) {
      l.b_gate = constant_vector(w, ff, 0.0f);
      l.b_up = constant_vector(w, ff, 0.0f);
      l.b_down = constant_vector(w, h, 0.0f);
    }
  }
  // Dummy weights are laid out as a qwen GGUF or HF checkpoint would be; a llama GGUF written
  // from them says so (save_gguf permutes nothing, so the layout must travel with them).
  w.rope_layout = RopeLayout::Neox;
  w.file_type = recipe.file_type();
  return w;
}

ModelWeights make_dummy_weights(const ModelConfig& c, DType dtype, uint64_t seed) {
  return make_dummy_weights(c, QuantRecipe::uniform(dtype), seed);
}

ModelWeights quantize_weights(const ModelWeights& src, const ModelConfig& config,
                              const QuantRecipe& recipe, const QuantizeOptions& options) {
  ModelWeights w;
  RecipeModel model = RecipeModel::of(config);
  model.num_layers = static_cast<int64_t>(src.layers.size());
  model.tied_embeddings = src.tied_embeddings;
  const int64_t total = 1 + (src.tied_embeddings ? 0 : 1) + 7 * model.num_layers;
  int64_t done = 0;
  auto requantize = [&](const std::string& name, int64_t layer, const WeightMatrix& m) {
    const DType dtype = recipe.weight_type(model, {name, layer, m.cols});
    WeightMatrix out = requantized_matrix(w, m, dtype, options.imatrix, name);
    if (options.on_matrix) options.on_matrix(name, m.dtype, dtype, ++done, total);
    return out;
  };
  w.token_embedding = requantize("token_embd.weight", -1, src.token_embedding);
  w.tied_embeddings = src.tied_embeddings;
  w.lm_head =
      src.tied_embeddings ? w.token_embedding : requantize("output.weight", -1, src.lm_head);
  w.output_norm = copy_vector(w, src.output_norm);
  w.rope_layout = src.rope_layout;
  w.rope_freq_factors = copy_vector(w, src.rope_freq_factors);
  w.layers.resize(src.layers.size());
  for (size_t i = 0; i < src.layers.size(); ++i) {
    const LayerWeights& s = src.layers[i];
    LayerWeights& l = w.layers[i];
    const auto layer = static_cast<int64_t>(i);
    auto n = [layer](const char* what) { return gguf_tensor_name(layer, what); };
    l.attn_norm = copy_vector(w, s.attn_norm);
    l.wq = requantize(n("attn_q.weight"), layer, s.wq);
    l.wk = requantize(n("attn_k.weight"), layer, s.wk);
    l.wv = requantize(n("attn_v.weight"), layer, s.wv);
    l.wo = requantize(n("attn_output.weight"), layer, s.wo);
    l.bq = copy_vector(w, s.bq);
    l.bk = copy_vector(w, s.bk);
    l.bv = copy_vector(w, s.bv);
    l.bo = copy_vector(w, s.bo);
    l.q_norm = copy_vector(w, s.q_norm);
    l.k_norm = copy_vector(w, s.k_norm);
    l.ffn_norm = copy_vector(w, s.ffn_norm);
    l.w_gate = requantize(n("ffn_gate.weight"), layer, s.w_gate);
    l.w_up = requantize(n("ffn_up.weight"), layer, s.w_up);
    l.w_down = requantize(n("ffn_down.weight"), layer, s.w_down);
    l.b_gate = copy_vector(w, s.b_gate);
    l.b_up = copy_vector(w, s.b_up);
    l.b_down = copy_vector(w, s.b_down);
  }
  w.file_type = recipe.file_type();
  return w;
}

ModelWeights quantize_weights(const ModelWeights& src, DType dtype) {
  // A uniform type asks nothing of the model but its layer count.
  ModelConfig config;
  config.num_layers = static_cast<int64_t>(src.layers.size());
  config.tie_word_embeddings = src.tied_embeddings;
  return quantize_weights(src, config, QuantRecipe::uniform(dtype));
}

}  // namespace tern
