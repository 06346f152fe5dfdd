// Weights made here rather than read: `--load-format dummy`, random, of the config's shapes.
// Rows are built in parallel.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tern/blocks/quantize_row.h"
#include "tern/models/weight_loader.h"
#include "tern/quant/quant_recipe.h"

namespace tern {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Allocates a [rows, cols] matrix of the type `recipe` gives the tensor `name` (of layer
// `layer`, -1 outside the blocks; `experts` matrices stacked) and fills each row from
// `make_row(i, f32_row)`, converting it. Rows are independent, so the result never depends on
// the threads.
template <typename MakeRow>
WeightMatrix build_matrix(ModelWeights& w, const QuantRecipe& recipe, const RecipeModel& model,
                          const std::string& name, int64_t layer, int64_t rows, int64_t cols,
                          int64_t experts, MakeRow make_row) {
  const DType dtype = recipe.weight_type(model, {name, layer, cols, experts});
  const auto row_bytes = dtype_bytes(dtype, static_cast<uint64_t>(cols));
  std::span<std::byte> data =
      w.own_bytes(static_cast<size_t>(*row_bytes) * static_cast<size_t>(rows));
  const QuantizeFn quantize = dtype == DType::F32 ? nullptr : quantize_fn(dtype);
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

}  // namespace

ModelWeights make_dummy_weights(const ModelConfig& c, const QuantRecipe& recipe, uint64_t seed) {
  ModelWeights w;
  const RecipeModel model = RecipeModel::of(c);
  uint64_t matrix_id = 0;
  // Uniform in ±a has standard deviation a/√3: a = 0.02·√3 gives an initialiser's 0.02.
  const float a = 0.02f * std::sqrt(3.0f);
  // The seed of a matrix is its position in this order, not its type: a mixture and a uniform
  // type draw the same f32 values.
  auto fill = [&](uint64_t id, int64_t i, float* row, int64_t cols) {
    uint64_t state = seed * 0x632be59bd9b4e019ull ^ (id << 40) ^ static_cast<uint64_t>(i);
    splitmix64(state);
    for (int64_t j = 0; j + 1 < cols; j += 2) {
      const uint64_t r = splitmix64(state);
      row[j] = a * (static_cast<float>(static_cast<uint32_t>(r) >> 8) * 0x1p-23f - 1.0f);
      row[j + 1] = a * (static_cast<float>(r >> 40) * 0x1p-23f - 1.0f);
    }
    if (cols % 2)
      row[cols - 1] = a * (static_cast<float>(splitmix64(state) >> 40) * 0x1p-23f - 1.0f);
  };
  auto random = [&](const std::string& name, int64_t layer, int64_t rows, int64_t cols,
                    int64_t experts = 1) {
    const uint64_t id = ++matrix_id;
    return build_matrix(w, recipe, model, name, layer, rows, cols, experts,
                        [&, id](int64_t i, float* row) { fill(id, i, row, cols); });
  };
  // A vector of weights (not a norm's ones): random as a matrix row, kept f32.
  auto random_vector = [&](int64_t n) {
    std::span<float> v = w.own_floats(static_cast<size_t>(n));
    fill(++matrix_id, 0, v.data(), n);
    return std::span<const float>(v);
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
    if (c.attention_sinks) l.attn_sinks = constant_vector(w, c.num_heads, 0.0f);
    l.ffn_norm = constant_vector(w, h, 1.0f);
    if (c.post_norms) {
      l.attn_post_norm = constant_vector(w, h, 1.0f);
      l.ffn_post_norm = constant_vector(w, h, 1.0f);
    }
    if (c.is_moe_layer(i)) {
      MixtureOfExperts& moe = l.moe.emplace();
      const int64_t ffe = c.moe_intermediate_size;
      moe.router = random(n("ffn_gate_inp.weight"), i, c.num_experts, h);
      moe.top_k = c.num_experts_per_tok;
      moe.normalize_top_k = c.norm_topk_prob;
      // Each of the three stacked as a GGUF file stacks them: one matrix of every expert's rows.
      const int64_t e = c.num_experts;
      moe.gate = split_experts(random(n("ffn_gate_exps.weight"), i, e * ffe, h, e), e);
      moe.up = split_experts(random(n("ffn_up_exps.weight"), i, e * ffe, h, e), e);
      moe.down = split_experts(random(n("ffn_down_exps.weight"), i, e * h, ffe, e), e);
      moe.swiglu_limit = static_cast<float>(c.swiglu_limit);
      if (c.expert_bias) {
        moe.router_bias = constant_vector(w, e, 0.0f);
        moe.gate_bias = constant_vector(w, e * ffe, 0.0f);
        moe.up_bias = constant_vector(w, e * ffe, 0.0f);
        moe.down_bias = constant_vector(w, e * h, 0.0f);
      }
      if (const int64_t sff = c.shared_expert_intermediate_size; sff > 0) {
        SharedExpert& shared = moe.shared.emplace();
        shared.gate_weight = random_vector(h);
        shared.gate = random(n("ffn_gate_shexp.weight"), i, sff, h);
        shared.up = random(n("ffn_up_shexp.weight"), i, sff, h);
        shared.down = random(n("ffn_down_shexp.weight"), i, h, sff);
      }
      continue;
    }
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

}  // namespace tern
