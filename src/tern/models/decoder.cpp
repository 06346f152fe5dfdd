// The decoder's forward pass: pre-norm attention and SwiGLU blocks on an f32 residual
// stream. Every op is per row (or per token for attention), which is what makes a
// sequence's logits independent of the batch it runs in.
#include "tern/models/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "tern/core/error.h"
#include "tern/kernels/cpu/ops/attention.h"
#include "tern/kernels/cpu/ops/row_ops.h"
#include "tern/kernels/cpu/vec_dot.h"
#include "tern/models/decoder_buffers.h"

namespace tern {
namespace {

cpu::WeightView view(const WeightMatrix& m) {
  return {m.dtype, m.rows, m.cols, m.data, m.row_bytes, m.packed};
}

cpu::RopeConfig rope_config(const ModelConfig& c, const ModelWeights& w) {
  cpu::RopeConfig r;
  r.head_dim = static_cast<int>(c.head_dim);
  r.rotary_dim = r.head_dim;
  r.theta = c.rope_theta;
  r.layout = w.rope_layout == RopeLayout::Interleaved ? cpu::RopeLayout::Interleaved
                                                      : cpu::RopeLayout::Neox;
  if (!w.rope_freq_factors.empty()) {
    // GGUF llama 3: the divisors replace the scaling parameters, which such files lack.
    r.freq_factors.assign(w.rope_freq_factors.begin(), w.rope_freq_factors.end());
  } else if (c.rope_scaling.type != RopeScalingType::None) {
    r.scaling.type = c.rope_scaling.type == RopeScalingType::Linear ? cpu::RopeScalingType::Linear
                                                                    : cpu::RopeScalingType::Llama3;
    r.scaling.factor = c.rope_scaling.factor;
    r.scaling.low_freq_factor = c.rope_scaling.low_freq_factor;
    r.scaling.high_freq_factor = c.rope_scaling.high_freq_factor;
    if (c.rope_scaling.original_max_position_embeddings > 0)
      r.scaling.original_max_position_embeddings = c.rope_scaling.original_max_position_embeddings;
  }
  return r;
}

// y[t, :] += bias for every row; no-op without a bias.
void add_bias(float* y, std::span<const float> bias, int64_t rows) {
  if (bias.empty()) return;
  const int64_t n = static_cast<int64_t>(bias.size());
  for (int64_t t = 0; t < rows; ++t) {
    float* row = y + t * n;
    for (int64_t i = 0; i < n; ++i) row[i] += bias[static_cast<size_t>(i)];
  }
}

bool same_activation(const WeightMatrix& a, const WeightMatrix& b) {
  return a.dtype == b.dtype ||
         cpu::type_kernels(a.dtype).activation == cpu::type_kernels(b.dtype).activation;
}

}  // namespace

Decoder::Decoder(const ModelConfig& config, const ModelWeights& weights)
    : config_(config), weights_(weights), rope_(rope_config(config, weights)) {
  if (static_cast<int64_t>(weights.layers.size()) != config.num_layers)
    throw Error("model weights have " + std::to_string(weights.layers.size()) +
                " layers, the config " + std::to_string(config.num_layers));
  if (weights.token_embedding.rows != config.vocab_size ||
      weights.token_embedding.cols != config.hidden_size)
    throw Error("token embedding shape does not match the config");
  // Resolve every matrix's kernels now: an unsupported type fails here, not mid-forward.
  for (const LayerWeights& l : weights.layers)
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      (void)cpu::type_kernels(m->dtype);
  (void)cpu::type_kernels(weights.lm_head.dtype);
  for (const LayerWeights& l : weights.layers)
    has_fused_ =
        has_fused_ || l.wqkv_packed.packed != nullptr || l.w_gate_up_packed.packed != nullptr;
}

cpu::KvCacheConfig Decoder::kv_cache_config(int64_t num_blocks, int block_size,
                                            cpu::KvDtype dtype) const {
  cpu::KvCacheConfig kv;
  kv.num_layers = static_cast<int>(config_.num_layers);
  kv.num_blocks = num_blocks;
  kv.block_size = block_size;
  kv.n_kv_heads = static_cast<int>(config_.num_kv_heads);
  kv.head_dim = static_cast<int>(config_.head_dim);
  kv.dtype = dtype;
  return kv;
}

void Decoder::reserve(int64_t t, int64_t r) {
  if (t <= capacity_tokens_ && r <= capacity_rows_) return;
  t = std::max(t, capacity_tokens_);
  r = std::max(r, capacity_rows_);
  const auto grow = [](std::vector<float>& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  };
  const DecoderBufferSizes s = decoder_buffer_sizes(config_, t, r, has_fused_);
  grow(x_, s.x);
  grow(xn_, s.xn);
  grow(q_, s.q);
  grow(k_, s.k);
  grow(v_, s.v);
  grow(attn_, s.attn);
  grow(out_, s.out);
  grow(gate_, s.gate);
  grow(up_, s.up);
  grow(fused_, s.fused);
  grow(cos_sin_, s.cos_sin);
  grow(final_, s.final_rows);
  // The matmuls quantize their inputs into ws_; growing it now keeps the first big step from
  // reallocating it matrix by matrix.
  auto shape = [](const WeightMatrix& m) { return MatrixShape{m.dtype, m.rows, m.cols}; };
  std::vector<MatrixShape> shapes;
  for (const LayerWeights& l : weights_.layers)
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      shapes.push_back(shape(*m));
  ws_.reserve(decoder_workspace_bytes(shapes, shape(weights_.lm_head), t, r));
  capacity_tokens_ = t;
  capacity_rows_ = r;
}

uint64_t Decoder::buffer_bytes() const {
  size_t floats = 0;
  for (const std::vector<float>* v :
       {&x_, &xn_, &q_, &k_, &v_, &attn_, &out_, &gate_, &up_, &fused_, &final_, &cos_sin_})
    floats += v->size();
  return floats * sizeof(float) + ws_.capacity();
}

void Decoder::check_step(const StepContext& ctx, const cpu::KvCache& cache) const {
  const int64_t t = ctx.num_tokens();
  if (static_cast<int64_t>(ctx.positions.size()) != t ||
      static_cast<int64_t>(ctx.slot_mapping.size()) != t || ctx.attention.num_tokens() != t)
    throw Error("step: token ids, positions, slot mapping and attention rows differ in length");
  for (int64_t i = 0; i < t; ++i) {
    const int32_t id = ctx.token_ids[static_cast<size_t>(i)];
    if (id < 0 || id >= config_.vocab_size)
      throw Error("step: token id " + std::to_string(id) +
                  " is outside the model's vocabulary of " + std::to_string(config_.vocab_size));
  }
  for (int32_t r : ctx.logit_rows)
    if (r < 0 || r >= t)
      throw Error("step: logit row " + std::to_string(r) + " is not a token of the step");
  cache.check_slot_mapping(ctx.slot_mapping);
  cpu::check_attention_batch(ctx.attention, cache, static_cast<int>(config_.num_heads));
}

void Decoder::forward(const StepContext& ctx, cpu::KvCache& cache, float* logits) {
  const int64_t t = ctx.num_tokens(), r = ctx.num_logit_rows(), h = config_.hidden_size;
  reserve(t, r);
  for (int64_t i = 0; i < t; ++i)
    weights_.embed(ctx.token_ids[static_cast<size_t>(i)], x_.data() + i * h);
  rope_.fill_cos_sin(ctx.positions, cos_sin_.data());  // the same positions in every layer
  for (int layer = 0; layer < static_cast<int>(config_.num_layers); ++layer) {
    attention_block(layer, ctx, cache);
    mlp_block(layer, t);
  }
  if (r == 0) return;
  // The final norm and lm_head only for the rows whose logits are wanted.
  const float eps = static_cast<float>(config_.rms_norm_eps);
  for (int64_t i = 0; i < r; ++i)
    cpu::rms_norm(x_.data() + ctx.logit_rows[static_cast<size_t>(i)] * h,
                  weights_.output_norm.data(), 1, h, eps, final_.data() + i * h);
  observe(-1, MatrixInput::LmHead, final_.data(), r, h);
  cpu::matmul(view(weights_.lm_head), final_.data(), r, logits, ws_);
}

void Decoder::attention_block(int layer, const StepContext& ctx, cpu::KvCache& cache) {
  const LayerWeights& l = weights_.layers[static_cast<size_t>(layer)];
  const ModelConfig& c = config_;
  const int64_t t = ctx.num_tokens(), h = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int n_heads = static_cast<int>(c.num_heads), n_kv = static_cast<int>(c.num_kv_heads);

  cpu::rms_norm(x_.data(), l.attn_norm.data(), t, h, eps, xn_.data());
  observe(layer, MatrixInput::AttnQkv, xn_.data(), t, h);
  if (l.wqkv_packed.packed != nullptr) {
    // One matmul over the three stacked, then each token's row apart.
    cpu::matmul(view(l.wqkv_packed), xn_.data(), t, fused_.data(), ws_);
    const int64_t qd = c.q_dim(), kvd = c.kv_dim(), width = qd + 2 * kvd;
    for (int64_t i = 0; i < t; ++i) {
      const float* row = fused_.data() + i * width;
      std::copy(row, row + qd, q_.data() + i * qd);
      std::copy(row + qd, row + qd + kvd, k_.data() + i * kvd);
      std::copy(row + qd + kvd, row + width, v_.data() + i * kvd);
    }
  } else if (same_activation(l.wq, l.wk) && same_activation(l.wq, l.wv)) {
    // q, k and v share one quantization of their input when their formats agree.
    const cpu::QuantizedActivations a =
        cpu::quantize_activations(l.wq.dtype, xn_.data(), t, h, ws_);
    cpu::matmul(view(l.wq), a, q_.data());
    cpu::matmul(view(l.wk), a, k_.data());
    cpu::matmul(view(l.wv), a, v_.data());
  } else {
    cpu::matmul(view(l.wq), xn_.data(), t, q_.data(), ws_);
    cpu::matmul(view(l.wk), xn_.data(), t, k_.data(), ws_);
    cpu::matmul(view(l.wv), xn_.data(), t, v_.data(), ws_);
  }
  add_bias(q_.data(), l.bq, t);
  add_bias(k_.data(), l.bk, t);
  add_bias(v_.data(), l.bv, t);
  if (c.qk_norm) {
    cpu::rms_norm(q_.data(), l.q_norm.data(), t * n_heads, c.head_dim, eps, q_.data());
    cpu::rms_norm(k_.data(), l.k_norm.data(), t * n_kv, c.head_dim, eps, k_.data());
  }
  rope_.apply_qk(q_.data(), n_heads, k_.data(), n_kv, cos_sin_.data(), t);
  cache.write(layer, k_.data(), v_.data(), ctx.slot_mapping);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  cpu::paged_attention(q_.data(), cache, layer, ctx.attention, n_heads, scale, attn_.data());
  observe(layer, MatrixInput::AttnOutput, attn_.data(), t, c.q_dim());
  cpu::matmul(view(l.wo), attn_.data(), t, out_.data(), ws_);
  add_bias(out_.data(), l.bo, t);
  cpu::add(x_.data(), out_.data(), x_.data(), t * h);
}

void Decoder::mlp_block(int layer, int64_t t) {
  const LayerWeights& l = weights_.layers[static_cast<size_t>(layer)];
  const ModelConfig& c = config_;
  const int64_t h = c.hidden_size, ff = c.intermediate_size;
  cpu::rms_norm(x_.data(), l.ffn_norm.data(), t, h, static_cast<float>(c.rms_norm_eps), xn_.data());
  observe(layer, MatrixInput::FfnGateUp, xn_.data(), t, h);
  // silu(gate) · up into gate_.
  if (l.w_gate_up_packed.packed != nullptr && l.b_gate.empty() && l.b_up.empty()) {
    // One matmul over the two stacked: each token's row is [gate | up], what silu_mul_fused takes.
    cpu::matmul(view(l.w_gate_up_packed), xn_.data(), t, fused_.data(), ws_);
    cpu::silu_mul_fused(fused_.data(), t, ff, gate_.data());
  } else {
    if (same_activation(l.w_gate, l.w_up)) {
      const cpu::QuantizedActivations a =
          cpu::quantize_activations(l.w_gate.dtype, xn_.data(), t, h, ws_);
      cpu::matmul(view(l.w_gate), a, gate_.data());
      cpu::matmul(view(l.w_up), a, up_.data());
    } else {
      cpu::matmul(view(l.w_gate), xn_.data(), t, gate_.data(), ws_);
      cpu::matmul(view(l.w_up), xn_.data(), t, up_.data(), ws_);
    }
    add_bias(gate_.data(), l.b_gate, t);
    add_bias(up_.data(), l.b_up, t);
    cpu::silu_mul(gate_.data(), up_.data(), gate_.data(), t * ff);
  }
  observe(layer, MatrixInput::FfnDown, gate_.data(), t, ff);
  cpu::matmul(view(l.w_down), gate_.data(), t, out_.data(), ws_);
  add_bias(out_.data(), l.b_down, t);
  cpu::add(x_.data(), out_.data(), x_.data(), t * h);
}

}  // namespace tern
