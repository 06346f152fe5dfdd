// Weights made here rather than read: `--load-format dummy` (random, of the config's shapes)
// and requantized copies of loaded weights. Rows are built in parallel.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tern/core/error.h"
#include "tern/kernels/cpu/quantize.h"
#include "tern/models/model_weights.h"

namespace tern {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool is_weight_type(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

// The type a matrix of `cols`-element rows gets when `want` is asked for: `want` when its
// rows are whole blocks, else llama.cpp's fallback (Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0
// when those fit), else F16, which always fits.
DType fitting_type(DType want, int64_t cols) {
  auto fits = [cols](DType t) { return dtype_bytes(t, static_cast<uint64_t>(cols)).has_value(); };
  if (fits(want)) return want;
  DType fallback = DType::F16;
  if (want == DType::Q4_K) fallback = DType::Q5_0;
  if (want == DType::Q5_K) fallback = DType::Q5_1;
  if (want == DType::Q6_K) fallback = DType::Q8_0;
  return fits(fallback) ? fallback : DType::F16;
}

// Allocates a [rows, cols] matrix of `want` (or its fallback) and fills each row from
// `make_row(i, f32_row)`, converting it. Rows are independent, so the result never depends on
// the threads.
template <typename MakeRow>
WeightMatrix build_matrix(ModelWeights& w, DType want, int64_t rows, int64_t cols, MakeRow make_row) {
  if (!is_weight_type(want))
    throw Error("weight type " + std::string(dtype_name(want)) +
                " is not one tern quantizes to (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, "
                "Q5_K, Q6_K)");
  const DType dtype = fitting_type(want, cols);
  const auto row_bytes = dtype_bytes(dtype, static_cast<uint64_t>(cols));
  std::span<std::byte> data = w.own_bytes(static_cast<size_t>(*row_bytes) * static_cast<size_t>(rows));
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

}  // namespace

ModelWeights make_dummy_weights(const ModelConfig& c, DType dtype, uint64_t seed) {
  ModelWeights w;
  uint64_t matrix_id = 0;
  // Uniform in ±a has standard deviation a/√3: a = 0.02·√3 gives an initialiser's 0.02.
  const float a = 0.02f * std::sqrt(3.0f);
  auto random = [&](int64_t rows, int64_t cols) {
    const uint64_t id = ++matrix_id;
    return build_matrix(w, dtype, rows, cols, [&, id](int64_t i, float* row) {
      uint64_t state = seed * 0x632be59bd9b4e019ull ^ (id << 40) ^ static_cast<uint64_t>(i);
      splitmix64(state);
      for (int64_t j = 0; j + 1 < cols; j += 2) {
        const uint64_t r = splitmix64(state);
        row[j] = a * (static_cast<float>(static_cast<uint32_t>(r) >> 8) * 0x1p-23f - 1.0f);
        row[j + 1] = a * (static_cast<float>(r >> 40) * 0x1p-23f - 1.0f);
      }
      if (cols % 2) row[cols - 1] = a * (static_cast<float>(splitmix64(state) >> 40) * 0x1p-23f - 1.0f);
    });
  };
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), ff = c.intermediate_size;
  w.token_embedding = random(c.vocab_size, h);
  w.output_norm = constant_vector(w, h, 1.0f);
  w.tied_embeddings = c.tie_word_embeddings;
  w.lm_head = w.tied_embeddings ? w.token_embedding : random(c.vocab_size, h);
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    l.attn_norm = constant_vector(w, h, 1.0f);
    l.wq = random(q, h);
    l.wk = random(kv, h);
    l.wv = random(kv, h);
    l.wo = random(h, q);
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
    l.w_gate = random(ff, h);
    l.w_up = random(ff, h);
    l.w_down = random(h, ff);
    if (c.mlp_bias) {
      l.b_gate = constant_vector(w, ff, 0.0f);
      l.b_up = constant_vector(w, ff, 0.0f);
      l.b_down = constant_vector(w, h, 0.0f);
    }
  }
  // Dummy weights are laid out as a qwen GGUF or HF checkpoint would be; a llama GGUF written
  // from them says so (save_gguf permutes nothing, so the layout must travel with them).
  w.rope_layout = RopeLayout::Neox;
  return w;
}

ModelWeights quantize_weights(const ModelWeights& src, DType dtype) {
  ModelWeights w;
  auto requantize = [&](const WeightMatrix& m) {
    return build_matrix(w, dtype, m.rows, m.cols, [&m](int64_t i, float* row) {
      if (m.dtype == DType::F32)
        std::memcpy(row, m.row(i), static_cast<size_t>(m.cols) * sizeof(float));
      else
        cpu::dequantize_row(m.dtype, m.row(i), row, m.cols);
    });
  };
  w.token_embedding = requantize(src.token_embedding);
  w.tied_embeddings = src.tied_embeddings;
  w.lm_head = src.tied_embeddings ? w.token_embedding : requantize(src.lm_head);
  w.output_norm = copy_vector(w, src.output_norm);
  w.rope_layout = src.rope_layout;
  w.rope_freq_factors = copy_vector(w, src.rope_freq_factors);
  w.layers.resize(src.layers.size());
  for (size_t i = 0; i < src.layers.size(); ++i) {
    const LayerWeights& s = src.layers[i];
    LayerWeights& l = w.layers[i];
    l.attn_norm = copy_vector(w, s.attn_norm);
    l.wq = requantize(s.wq);
    l.wk = requantize(s.wk);
    l.wv = requantize(s.wv);
    l.wo = requantize(s.wo);
    l.bq = copy_vector(w, s.bq);
    l.bk = copy_vector(w, s.bk);
    l.bv = copy_vector(w, s.bv);
    l.bo = copy_vector(w, s.bo);
    l.q_norm = copy_vector(w, s.q_norm);
    l.k_norm = copy_vector(w, s.k_norm);
    l.ffn_norm = copy_vector(w, s.ffn_norm);
    l.w_gate = requantize(s.w_gate);
    l.w_up = requantize(s.w_up);
    l.w_down = requantize(s.w_down);
    l.b_gate = copy_vector(w, s.b_gate);
    l.b_up = copy_vector(w, s.b_up);
    l.b_down = copy_vector(w, s.b_down);
  }
  return w;
}

}  // namespace tern
