// Requantized copies of loaded weights (weight_loader.h's quantize_weights): each matrix
// through f32 by the weight quantizers; by GPTQ where an importance matrix has the input's
// second moments, with GPTQ's act-order when asked; after AWQ's scaling of each layer when
// asked. Rows are quantized in parallel, and the result never depends on the threads.
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "tern/blocks/block_layouts.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/models/checkpoint_weights.h"
#include "tern/models/weight_loader.h"
#include "tern/quant/awq.h"
#include "tern/quant/gptq.h"
#include "tern/quant/importance_matrix.h"
#include "tern/quant/weight_quantizer.h"

namespace tern {
namespace {

std::span<const float> copy_vector(ModelWeights& w, std::span<const float> src) {
  if (src.empty()) return {};
  std::span<float> v = w.own_floats(src.size());
  std::memcpy(v.data(), src.data(), src.size_bytes());
  return v;
}

// Row i of m in f32, in the inputs' order (an act-order matrix's columns put back).
void dequantized_row(const WeightMatrix& m, int64_t i, float* out, std::vector<float>& scratch) {
  if (m.input_order == nullptr) return dequantize_row(m.dtype, m.row(i), out, m.cols);
  scratch.resize(static_cast<size_t>(m.cols));
  dequantize_row(m.dtype, m.row(i), scratch.data(), m.cols);
  for (int64_t j = 0; j < m.cols; ++j) out[m.input_order[j]] = scratch[static_cast<size_t>(j)];
}

// GPTQ's act-order for one matrix: `quantized`, the order its columns are quantized in
// (quant::act_order), whose runs of `group` are the groups; and `stored`, the order they are
// kept in: each group's inputs ascending, as a checkpoint's g_idx gives them on load
// (models/checkpoint_weights.h), so that weights quantized here and the checkpoint written from
// them compute alike. stored[p] = quantized[from[p]], p and from[p] in the same group.
struct ActOrder {
  std::vector<int32_t> quantized, stored, from;

  static ActOrder of(std::span<const float> moments, int64_t cols, int group) {
    ActOrder a;
    a.quantized = quant::act_order(moments, cols);
    std::vector<int32_t> position(static_cast<size_t>(cols));
    for (int64_t i = 0; i < cols; ++i)
      position[static_cast<size_t>(a.quantized[i])] = static_cast<int32_t>(i);
    a.stored = a.quantized;
    for (int64_t g = 0; g < cols; g += group)
      std::sort(a.stored.begin() + g, a.stored.begin() + g + group);
    a.from.resize(static_cast<size_t>(cols));
    for (int64_t p = 0; p < cols; ++p)
      a.from[static_cast<size_t>(p)] = position[static_cast<size_t>(a.stored[p])];
    return a;
  }
};

// The groups of a row quantized in act-order, their codes moved to the stored order.
void store_act_order(DType dtype, const std::byte* quantized, std::byte* out,
                     std::span<const int32_t> from) {
  with_affine_block<bool>(dtype, [&]<class B>() {
    const auto* in = reinterpret_cast<const B*>(quantized);
    auto* blocks = reinterpret_cast<B*>(out);
    const auto groups = static_cast<int64_t>(from.size()) / B::kElems;
    for (int64_t g = 0; g < groups; ++g) {
      blocks[g] = in[g];  // scale and bias; every code is set below
      for (int e = 0; e < B::kElems; ++e) {
        const int32_t source = from[static_cast<size_t>(g * B::kElems + e)];
        set_affine_code(blocks[g], e, affine_code(in[source / B::kElems], source % B::kElems));
      }
    }
    return true;
  });
}

// `m` as `dtype` through f32, by the weight quantizers with the importances of `name` when
// `imatrix` has them (by GPTQ when it has the input's second moments too; in act-order when
// `act_order`); copied when it already is `dtype`.
WeightMatrix requantized_matrix(ModelWeights& w, const WeightMatrix& m, DType dtype,
                                const ImportanceMatrix* imatrix, const std::string& name,
                                quant::AffineRule rule, bool act_order, InputOrders& orders) {
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
  // An expert tensor's entry has a row of importances per expert, each for its expert's slice of
  // the stacked rows (llama-quantize's per-expert imatrix); a dense matrix's one row for all.
  const auto importance_rows =
      static_cast<int64_t>(importance.size()) / std::max<int64_t>(m.cols, 1);
  if (imp != nullptr && (importance_rows * m.cols != static_cast<int64_t>(importance.size()) ||
                         m.rows % importance_rows != 0))
    throw Error(name + ": the importance matrix has " + std::to_string(importance.size()) +
                " importances for a matrix of " + std::to_string(m.rows) + " rows of " +
                std::to_string(m.cols));
  const int64_t rows_per_importance = imp != nullptr ? m.rows / importance_rows : 1;
  // With the input's whole second-moment matrix, GPTQ (which needs a type of blocks).
  std::optional<quant::GptqFactor> gptq;
  std::optional<ActOrder> order;
  if (imatrix != nullptr && quant::has_block_code(dtype)) {
    const std::vector<float> moments = imatrix->second_moments(name);
    if (!moments.empty() && act_order) {
      if (!affine_int_format(dtype))
        throw Error(name + ": act-order is for the affine groups of GPTQ checkpoints, not " +
                    std::string(dtype_name(dtype)));
      order = ActOrder::of(moments, m.cols, quant::block_format(dtype).elems);
      gptq = quant::GptqFactor::of(quant::permuted_moments(moments, order->quantized), m.cols);
    } else if (!moments.empty()) {
      gptq = quant::GptqFactor::of(moments, m.cols);
    }
  }
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(m.cols)), scratch, gathered;
    std::vector<std::byte> quantized;
#pragma omp for schedule(dynamic, 8)
    for (int64_t i = 0; i < m.rows; ++i) {
      dequantized_row(m, i, row.data(), scratch);
      std::byte* out = data.data() + static_cast<size_t>(i) * row_bytes;
      if (order) {
        gathered.resize(row.size());
        for (size_t j = 0; j < row.size(); ++j)
          gathered[j] = row[static_cast<size_t>(order->quantized[j])];
        quantized.resize(row_bytes);
        quant::quantize_row_gptq(dtype, gathered.data(), quantized.data(), m.cols, *gptq, rule);
        store_act_order(dtype, quantized.data(), out, order->from);
      } else if (gptq) {
        quant::quantize_row_gptq(dtype, row.data(), out, m.cols, *gptq, rule);
      } else {
        const float* row_importance =
            imp != nullptr ? imp + (i / rows_per_importance) * m.cols : nullptr;
        quant::quantize_weight_row(dtype, row.data(), out, m.cols, row_importance, rule);
      }
    }
  }
  WeightMatrix out{dtype, m.rows, m.cols, data.data(), row_bytes};
  if (order) {
    const bool identity = std::is_sorted(order->stored.begin(), order->stored.end());
    out.input_order = identity ? nullptr : orders.intern(std::move(order->stored), w);
  }
  return out;
}

// A layer's matrices with their GGUF names, and its vectors, in LayerWeights' order.
constexpr std::pair<WeightMatrix LayerWeights::*, const char*> kLayerMatrices[] = {
    {&LayerWeights::wq, "attn_q.weight"},       {&LayerWeights::wk, "attn_k.weight"},
    {&LayerWeights::wv, "attn_v.weight"},       {&LayerWeights::wo, "attn_output.weight"},
    {&LayerWeights::w_gate, "ffn_gate.weight"}, {&LayerWeights::w_up, "ffn_up.weight"},
    {&LayerWeights::w_down, "ffn_down.weight"}};
enum LayerMatrix { kQ, kK, kV, kO, kGate, kUp, kDown, kNumLayerMatrices };
constexpr std::span<const float> LayerWeights::*kLayerVectors[] = {&LayerWeights::attn_norm,
                                                                   &LayerWeights::bq,
                                                                   &LayerWeights::bk,
                                                                   &LayerWeights::bv,
                                                                   &LayerWeights::bo,
                                                                   &LayerWeights::q_norm,
                                                                   &LayerWeights::k_norm,
                                                                   &LayerWeights::ffn_norm,
                                                                   &LayerWeights::b_gate,
                                                                   &LayerWeights::b_up,
                                                                   &LayerWeights::b_down,
                                                                   &LayerWeights::attn_sinks,
                                                                   &LayerWeights::attn_post_norm,
                                                                   &LayerWeights::ffn_post_norm};

// A layer's matrices (in kLayerMatrices' order) and the vectors AWQ's scaling changes, as f32
// copies in the inputs' order.
struct FloatLayer {
  std::vector<float> matrices[kNumLayerMatrices];
  std::vector<float> attn_norm, ffn_norm, bv, b_up;
  const LayerWeights& source;

  explicit FloatLayer(const LayerWeights& l)
      : attn_norm(l.attn_norm.begin(), l.attn_norm.end()),
        ffn_norm(l.ffn_norm.begin(), l.ffn_norm.end()),
        bv(l.bv.begin(), l.bv.end()),
        b_up(l.b_up.begin(), l.b_up.end()),
        source(l) {
    for (int i = 0; i < kNumLayerMatrices; ++i) {
      const WeightMatrix& m = l.*kLayerMatrices[i].first;
      matrices[i].resize(static_cast<size_t>(m.rows * m.cols));
#pragma omp parallel
      {
        std::vector<float> scratch;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < m.rows; ++r)
          dequantized_row(m, r, matrices[i].data() + r * m.cols, scratch);
      }
    }
  }
  quant::FloatMatrix matrix(LayerMatrix i) {
    const WeightMatrix& m = source.*kLayerMatrices[i].first;
    return {matrices[i].data(), m.rows, m.cols};
  }
  // The scaled layer: `source` with these matrices and vectors in place of its own.
  LayerWeights weights() const {
    LayerWeights l = source;
    for (int i = 0; i < kNumLayerMatrices; ++i) {
      WeightMatrix& m = l.*kLayerMatrices[i].first;
      m = {DType::F32, m.rows, m.cols, reinterpret_cast<const std::byte*>(matrices[i].data()),
           static_cast<size_t>(m.cols) * sizeof(float)};
    }
    l.attn_norm = attn_norm;
    l.ffn_norm = ffn_norm;
    l.bv = bv;
    l.b_up = b_up;
    return l;
  }
};

// AWQ's scaling of layer `i` (quant/awq.h) at its four points: the attention norm before q, k
// and v; v's rows before o (when they are as many as o's inputs: no grouped heads); the MLP norm
// before gate and up; up's rows before down. A point the importance matrix has no entry for is
// left. `scaled` receives the importances of the scaled inputs (E[x_j²] / s_j²).
void awq_scale_layer(int64_t i, FloatLayer& f, const ImportanceMatrix& imatrix, DType dtype,
                     quant::AffineRule rule, ImportanceMatrix& scaled) {
  auto n = [i](const char* what) { return gguf_tensor_name(i, what); };
  auto scale = [&](quant::AwqScalingPoint point, std::initializer_list<const char*> readers) {
    const std::vector<float> importance = imatrix.importance(n(*readers.begin()));
    if (importance.empty()) return;
    point.importance = importance;
    const std::vector<float> s = quant::search_awq_scales(point, dtype, rule);
    quant::apply_awq_scales(point, s);
    for (const char* reader : readers) {
      ImportanceEntry e;
      e.count = 1;
      e.sum_squares.resize(s.size());
      const std::vector<float> own = imatrix.importance(n(reader));
      for (size_t j = 0; j < s.size(); ++j)
        e.sum_squares[j] =
            (own.empty() ? importance[j] : own[j]) / (static_cast<double>(s[j]) * s[j]);
      scaled.entries[n(reader)] = std::move(e);
    }
  };
  scale({f.attn_norm, {}, {}, {f.matrix(kQ), f.matrix(kK), f.matrix(kV)}, {}},
        {"attn_q.weight", "attn_k.weight", "attn_v.weight"});
  if (f.source.wv.rows == f.source.wo.cols)
    scale({{}, f.matrix(kV), f.bv, {f.matrix(kO)}, {}}, {"attn_output.weight"});
  scale({f.ffn_norm, {}, {}, {f.matrix(kGate), f.matrix(kUp)}, {}},
        {"ffn_gate.weight", "ffn_up.weight"});
  scale({{}, f.matrix(kUp), f.b_up, {f.matrix(kDown)}, {}}, {"ffn_down.weight"});
}

}  // namespace

ModelWeights quantize_weights(const ModelWeights& src, const ModelConfig& config,
                              const QuantRecipe& recipe, const QuantizeOptions& options) {
  if (options.awq && options.imatrix == nullptr)
    throw Error("AWQ's scaling needs an importance matrix (the inputs' statistics)");
  ModelWeights w;
  InputOrders orders;
  RecipeModel model = RecipeModel::of(config);
  model.num_layers = static_cast<int64_t>(src.layers.size());
  model.tied_embeddings = src.tied_embeddings;
  model.has_imatrix = options.imatrix != nullptr;
  // GGUF's tensors: a layer's experts are three (stacked), its router one more, its shared
  // expert three more.
  int64_t total = 1 + (src.tied_embeddings ? 0 : 1);
  for (const LayerWeights& l : src.layers) total += !l.moe ? 7 : l.moe->shared ? 11 : 8;
  int64_t done = 0;
  auto requantize = [&](const std::string& name, int64_t layer, const WeightMatrix& m,
                        const ImportanceMatrix* imatrix, int64_t experts = 1) {
    const DType dtype = recipe.weight_type(model, {name, layer, m.cols, experts});
    // llama-quantize's rule: a layer matrix of a type fitted to an importance matrix refuses to
    // go without its entry (the embedding and output are exempt).
    if (layer >= 0 && m.dtype != dtype && recipe.needs_importance_matrix(dtype) &&
        (imatrix == nullptr || imatrix->importance(name).empty()))
      throw Error(name + ": " + std::string(dtype_name(dtype)) +
                  " needs an importance matrix entry for this matrix, and " +
                  (options.imatrix == nullptr ? "there is no --imatrix"
                                              : "the importance matrix has none") +
                  " (llama-quantize refuses it too)");
    WeightMatrix out = requantized_matrix(w, m, dtype, imatrix, name, options.affine_rule,
                                          options.act_order && layer >= 0, orders);
    if (options.on_matrix) options.on_matrix(name, m.dtype, dtype, ++done, total);
    return out;
  };
  w.token_embedding = requantize("token_embd.weight", -1, src.token_embedding, options.imatrix);
  w.tied_embeddings = src.tied_embeddings;
  w.lm_head = src.tied_embeddings ? w.token_embedding
                                  : requantize("output.weight", -1, src.lm_head, options.imatrix);
  w.output_norm = copy_vector(w, src.output_norm);
  w.rope_layout = src.rope_layout;
  w.rope_freq_factors = copy_vector(w, src.rope_freq_factors);
  w.layers.resize(src.layers.size());
  for (size_t i = 0; i < src.layers.size(); ++i) {
    const LayerWeights& s = src.layers[i];
    LayerWeights& l = w.layers[i];
    const auto layer = static_cast<int64_t>(i);
    auto n = [layer](const char* what) { return gguf_tensor_name(layer, what); };
    // Under AWQ the matrices and vectors it scales come from f32 copies, and the importances
    // from those of the scaled inputs.
    std::optional<FloatLayer> f;
    ImportanceMatrix scaled;
    const ImportanceMatrix* imatrix = options.imatrix;
    LayerWeights from = s;
    if (options.awq && s.moe)
      throw Error("AWQ's scaling of layer " + std::to_string(i) +
                  "'s experts is not supported; quantize this model without --awq");
    if (options.awq) {
      f.emplace(s);
      const DType dtype = recipe.weight_type(model, {n("attn_q.weight"), layer, s.wq.cols});
      awq_scale_layer(layer, *f, *options.imatrix, dtype, options.affine_rule, scaled);
      for (const auto& [field, name] : kLayerMatrices)
        if (!scaled.entries.contains(n(name)))
          if (auto it = options.imatrix->entries.find(n(name));
              it != options.imatrix->entries.end())
            scaled.entries[n(name)] = {it->second.sum_squares, {}, it->second.count, {}};
      imatrix = &scaled;
      from = f->weights();
    }
    // A sparse layer has no dense MLP (its gate, up and down are empty).
    for (const auto& [field, name] :
         std::span(kLayerMatrices).first(s.moe ? kGate : kNumLayerMatrices))
      l.*field = requantize(n(name), layer, from.*field, imatrix);
    for (const auto field : kLayerVectors) l.*field = copy_vector(w, from.*field);
    if (!s.moe) continue;
    // The router and the shared expert weigh by their entries as a dense matrix does; each
    // expert of the stacked tensors by its own row of their entries.
    MixtureOfExperts& moe = l.moe.emplace(*s.moe);
    moe.router = requantize(n("ffn_gate_inp.weight"), layer, s.moe->router, imatrix);
    const auto experts = [&](const char* name, const std::vector<WeightMatrix>& parts) {
      // Stacked in memory as GGUF stores them, which save_gguf then writes without a copy.
      std::vector<std::byte> copy;
      const WeightMatrix whole = gather_experts(parts, copy);
      const auto count = static_cast<int64_t>(parts.size());
      return split_experts(requantize(n(name), layer, whole, imatrix, count), count);
    };
    moe.gate = experts("ffn_gate_exps.weight", s.moe->gate);
    moe.up = experts("ffn_up_exps.weight", s.moe->up);
    moe.down = experts("ffn_down_exps.weight", s.moe->down);
    if (const std::optional<SharedExpert>& shared = s.moe->shared) {
      moe.shared->gate = requantize(n("ffn_gate_shexp.weight"), layer, shared->gate, imatrix);
      moe.shared->up = requantize(n("ffn_up_shexp.weight"), layer, shared->up, imatrix);
      moe.shared->down = requantize(n("ffn_down_shexp.weight"), layer, shared->down, imatrix);
      moe.shared->gate_weight = copy_vector(w, shared->gate_weight);
    }
    for (auto field : {&MixtureOfExperts::router_bias, &MixtureOfExperts::gate_bias,
                       &MixtureOfExperts::up_bias, &MixtureOfExperts::down_bias})
      moe.*field = copy_vector(w, (*s.moe).*field);
  }
  w.file_type = recipe.file_type();
  return w;
}

void convert_float_matrices(ModelWeights& w, DType dtype) {
  auto is_float = [](DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; };
  if (!is_float(dtype))
    throw Error("--dtype converts float matrices to a float type, not to " +
                std::string(dtype_name(dtype)));
  InputOrders orders;  // float matrices have no act-order, so it stays empty
  bool converted = false;
  auto convert = [&](WeightMatrix& m) {
    if (!is_float(m.dtype) || m.dtype == dtype) return;
    m = requantized_matrix(w, m, dtype, nullptr, "", quant::AffineRule::ZeroPoint, false, orders);
    converted = true;
  };
  convert(w.token_embedding);
  if (w.tied_embeddings)
    w.lm_head = w.token_embedding;
  else
    convert(w.lm_head);
  for (LayerWeights& l : w.layers) l.for_each_matrix(convert);
  const bool float_file = w.file_type == FileType::AllF32 || w.file_type == FileType::MostlyF16 ||
                          w.file_type == FileType::MostlyBF16;
  if (converted && float_file) w.file_type = uniform_file_type(dtype);
}

ModelWeights quantize_weights(const ModelWeights& src, DType dtype) {
  // A uniform type asks nothing of the model but its layer count.
  ModelConfig config;
  config.num_layers = static_cast<int64_t>(src.layers.size());
  config.tie_word_embeddings = src.tied_embeddings;
  return quantize_weights(src, config, QuantRecipe::uniform(dtype));
}

}  // namespace tern
