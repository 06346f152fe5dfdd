// The decoder's forward pass: pre-norm attention and SwiGLU blocks on an f32 residual
// stream, each op one Backend call over the whole batch. Every op is per row (or per token
// for attention), which is what makes a sequence's logits independent of the batch it runs in.
#include "tern/models/decoder.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "tern/backend/cpu/cpu_backend.h"
#include "tern/backend/decoder_buffers.h"
#include "tern/core/error.h"

namespace tern {
namespace {

// The shape checks come before the backend is made, so a mismatched model is named as such
// rather than by whatever the backend trips over first.
const ModelWeights& checked(const ModelConfig& config, const ModelWeights& weights) {
  if (static_cast<int64_t>(weights.layers.size()) != config.num_layers)
    throw Error("model weights have " + std::to_string(weights.layers.size()) +
                " layers, the config " + std::to_string(config.num_layers));
  if (weights.token_embedding.rows != config.vocab_size ||
      weights.token_embedding.cols != config.hidden_size)
    throw Error("token embedding shape does not match the config");
  return weights;
}

}  // namespace

Decoder::Decoder(const ModelConfig& config, const ModelWeights& weights)
    : Decoder(config, weights, make_cpu_backend(config, checked(config, weights))) {}

Decoder::Decoder(const ModelConfig& config, const ModelWeights& weights,
                 std::unique_ptr<Backend> backend)
    : config_(config), weights_(checked(config, weights)), backend_(std::move(backend)) {
  if (backend_ == nullptr) throw Error("decoder: no backend");
}

KvCacheConfig Decoder::kv_cache_config(int64_t num_blocks, int block_size, KvDtype dtype) const {
  KvCacheConfig kv;
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
  const DecoderBufferSizes s = decoder_buffer_sizes(config_, t, r, /*fused=*/false);
  grow(x_, s.x);
  grow(xn_, s.xn);
  grow(q_, s.q);
  grow(k_, s.k);
  grow(v_, s.v);
  grow(attn_, s.attn);
  grow(out_, s.out);
  grow(gate_, s.gate);
  grow(final_, s.final_rows);
  backend_->reserve(t, r);
  capacity_tokens_ = t;
  capacity_rows_ = r;
}

uint64_t Decoder::buffer_bytes() const {
  size_t floats = 0;
  for (const std::vector<float>* v : {&x_, &xn_, &q_, &k_, &v_, &attn_, &out_, &gate_, &final_})
    floats += v->size();
  return floats * sizeof(float) + backend_->scratch_bytes();
}

void Decoder::check_step(const StepContext& ctx, const KvCache& cache) const {
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
  backend_->check_attention(ctx.attention, cache, static_cast<int>(config_.num_heads));
}

void Decoder::forward(const StepContext& ctx, KvCache& cache, float* logits) {
  const int64_t t = ctx.num_tokens(), r = ctx.num_logit_rows(), h = config_.hidden_size;
  reserve(t, r);
  Backend& b = *backend_;
  b.embed(ctx.token_ids, x_.data());
  b.set_positions(ctx.positions);  // the same positions in every layer
  for (int layer = 0; layer < static_cast<int>(config_.num_layers); ++layer) {
    attention_block(layer, ctx, cache);
    mlp_block(layer, t);
  }
  if (r == 0) return;
  // The final norm and lm_head only for the rows whose logits are wanted.
  b.rms_norm_rows(x_.data(), ctx.logit_rows, weights_.output_norm.data(), h,
                  static_cast<float>(config_.rms_norm_eps), final_.data());
  observe(-1, MatrixInput::LmHead, final_.data(), r, h);
  b.matmul(weights_.lm_head, {}, final_.data(), r, logits);
}

void Decoder::attention_block(int layer, const StepContext& ctx, KvCache& cache) {
  const LayerWeights& l = weights_.layers[static_cast<size_t>(layer)];
  const ModelConfig& c = config_;
  Backend& b = *backend_;
  const int64_t t = ctx.num_tokens(), h = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int n_heads = static_cast<int>(c.num_heads), n_kv = static_cast<int>(c.num_kv_heads);

  b.rms_norm(x_.data(), l.attn_norm.data(), t, h, eps, xn_.data());
  observe(layer, MatrixInput::AttnQkv, xn_.data(), t, h);
  b.qkv(l.wq, l.wk, l.wv, l.wqkv_packed, l.bq, l.bk, l.bv, xn_.data(), t, q_.data(), k_.data(),
        v_.data());
  if (c.qk_norm) {
    b.rms_norm(q_.data(), l.q_norm.data(), t * n_heads, c.head_dim, eps, q_.data());
    b.rms_norm(k_.data(), l.k_norm.data(), t * n_kv, c.head_dim, eps, k_.data());
  }
  b.rope(q_.data(), n_heads, k_.data(), n_kv, t);
  b.write_kv(cache, layer, k_.data(), v_.data(), ctx.slot_mapping);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  b.attention(q_.data(), cache, layer, ctx.attention, n_heads, scale, attn_.data());
  observe(layer, MatrixInput::AttnOutput, attn_.data(), t, c.q_dim());
  b.matmul(l.wo, l.bo, attn_.data(), t, out_.data());
  b.add(x_.data(), out_.data(), t * h);
}

void Decoder::mlp_block(int layer, int64_t t) {
  const LayerWeights& l = weights_.layers[static_cast<size_t>(layer)];
  const ModelConfig& c = config_;
  Backend& b = *backend_;
  const int64_t h = c.hidden_size;
  b.rms_norm(x_.data(), l.ffn_norm.data(), t, h, static_cast<float>(c.rms_norm_eps), xn_.data());
  observe(layer, MatrixInput::FfnGateUp, xn_.data(), t, h);
  b.gate_up_silu(l.w_gate, l.w_up, l.w_gate_up_packed, l.b_gate, l.b_up, xn_.data(), t,
                 gate_.data());
  observe(layer, MatrixInput::FfnDown, gate_.data(), t, c.intermediate_size);
  b.matmul(l.w_down, l.b_down, gate_.data(), t, out_.data());
  b.add(x_.data(), out_.data(), t * h);
}

}  // namespace tern
