// The decoder's forward pass: pre-norm attention and SwiGLU / GeGLU (or mixture-of-experts)
// blocks on an f32 residual stream (Gemma 3 norms each block's output again before adding it),
// each op one Backend call over the whole batch. Every op is per row (or
// per token for attention), which is what makes a sequence's logits independent of the batch it
// runs in.
#include "tern/models/decoder.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

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
  for (int64_t i = 0; i < config.num_layers; ++i) {
    const LayerWeights& l = weights.layers[static_cast<size_t>(i)];
    if (l.moe.has_value() != config.is_moe_layer(i) ||
        (l.moe && (l.moe->num_experts() != config.num_experts ||
                   l.moe->top_k != config.num_experts_per_tok ||
                   l.moe->shared.has_value() != (config.shared_expert_intermediate_size > 0))))
      throw Error("layer " + std::to_string(i) + "'s experts do not match the config");
    if (l.attn_post_norm.empty() == config.post_norms ||
        l.ffn_post_norm.empty() == config.post_norms)
      throw Error("layer " + std::to_string(i) + "'s post norms do not match the config");
    if (l.attn_sinks.empty() == config.attention_sinks ||
        (l.moe && l.moe->router_bias.empty() == config.expert_bias))
      throw Error("layer " + std::to_string(i) + "'s sinks or biases do not match the config");
  }
  return weights;
}

}  // namespace

Decoder::Decoder(const ModelConfig& config, const ModelWeights& weights, const Device& device)
    : Decoder(config, weights, device.make_backend(config, checked(config, weights))) {}

Decoder::Decoder(const ModelConfig& config, const ModelWeights& weights,
                 std::unique_ptr<Backend> backend)
    : config_(config), weights_(checked(config, weights)), backend_(std::move(backend)) {
  if (backend_ == nullptr) throw Error("decoder: no backend");
  const int64_t h = config.hidden_size, q = config.q_dim(), kv = config.kv_dim();
  const auto per_token = [&](int64_t width) {
    return backend_->make_activation(width, ActivationRows::PerToken);
  };
  x_ = per_token(h);
  xn_ = per_token(h);
  q_ = per_token(q);
  k_ = per_token(kv);
  v_ = per_token(kv);
  attn_ = per_token(q);
  out_ = per_token(h);
  gate_ = per_token(config.dense_intermediate_size());
  final_ = backend_->make_activation(h, ActivationRows::PerLogitRow);
}

void Decoder::reserve(int64_t t, int64_t r) { backend_->reserve(t, r); }

void Decoder::set_observer(ActivationObserver* observer) {
  // A mixture of experts' routes and expert intermediates live inside moe_mlp: the backend
  // copies them out only while observed (and a backend that cannot refuses here).
  if (config_.num_experts > 0) backend_->capture_moe(observer != nullptr ? &moe_capture_ : nullptr);
  observer_ = observer;
}

void Decoder::observe(int layer, MatrixInput input, Activation x, int64_t num_tokens,
                      int64_t cols) {
  if (observer_ == nullptr) return;
  observed_.resize(static_cast<size_t>(num_tokens * cols));
  backend_->read_rows(x, num_tokens, cols, observed_.data());
  observer_->observe(layer, input, observed_.data(), num_tokens, cols);
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
  b.embed(ctx.token_ids, x_);
  b.set_positions(ctx.positions);  // the same positions in every layer
  for (int layer = 0; layer < static_cast<int>(config_.num_layers); ++layer) {
    attention_block(layer, ctx, cache);
    mlp_block(layer, t);
  }
  if (r == 0) return;
  // The final norm and lm_head only for the rows whose logits are wanted.
  b.rms_norm_rows(x_, ctx.logit_rows, weights_.output_norm.data(), h,
                  static_cast<float>(config_.rms_norm_eps), final_);
  observe(-1, MatrixInput::LmHead, final_, r, h);
  b.logits(weights_.lm_head, final_, r, logits);
}

void Decoder::attention_block(int layer, const StepContext& ctx, KvCache& cache) {
  const LayerWeights& l = weights_.layers[static_cast<size_t>(layer)];
  const ModelConfig& c = config_;
  Backend& b = *backend_;
  const int64_t t = ctx.num_tokens(), h = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int n_heads = static_cast<int>(c.num_heads), n_kv = static_cast<int>(c.num_kv_heads);

  b.rms_norm(x_, l.attn_norm.data(), t, h, eps, xn_);
  observe(layer, MatrixInput::AttnQkv, xn_, t, h);
  b.qkv(l.wq, l.wk, l.wv, l.wqkv_packed, l.bq, l.bk, l.bv, xn_, t, q_, k_, v_);
  if (c.qk_norm) {
    b.rms_norm(q_, l.q_norm.data(), t * n_heads, c.head_dim, eps, q_);
    b.rms_norm(k_, l.k_norm.data(), t * n_kv, c.head_dim, eps, k_);
  }
  b.rope(layer, q_, n_heads, k_, n_kv, t);
  b.write_kv(cache, layer, k_, v_, ctx.slot_mapping);
  const float scale = c.attention_scale > 0 ? static_cast<float>(c.attention_scale)
                                            : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  b.attention(q_, cache, layer, ctx.attention, n_heads, scale, c.attention_window(layer),
              l.attn_sinks, attn_);
  observe(layer, MatrixInput::AttnOutput, attn_, t, c.q_dim());
  b.matmul(l.wo, l.bo, attn_, t, out_);
  if (c.post_norms) b.rms_norm(out_, l.attn_post_norm.data(), t, h, eps, out_);
  b.add(x_, out_, t * h);
}

void Decoder::mlp_block(int layer, int64_t t) {
  const LayerWeights& l = weights_.layers[static_cast<size_t>(layer)];
  const ModelConfig& c = config_;
  Backend& b = *backend_;
  const int64_t h = c.hidden_size;
  b.rms_norm(x_, l.ffn_norm.data(), t, h, static_cast<float>(c.rms_norm_eps), xn_);
  if (l.moe) {
    observe(layer, MatrixInput::MoeInput, xn_, t, h);
    b.moe_mlp(*l.moe, xn_, t, out_);
    if (observer_ != nullptr) {
      // observed_ still holds the normed input MoeInput copied.
      if (!moe_capture_.shared_down_inputs.empty())
        observer_->observe(layer, MatrixInput::SharedDown, moe_capture_.shared_down_inputs.data(),
                           t, moe_capture_.shared_ff);
      observer_->observe_experts(layer, observed_.data(), h, moe_capture_);
    }
    b.add(x_, out_, t * h);
    return;
  }
  observe(layer, MatrixInput::FfnGateUp, xn_, t, h);
  b.gate_up(l.w_gate, l.w_up, l.w_gate_up_packed, l.b_gate, l.b_up, xn_, t, gate_);
  observe(layer, MatrixInput::FfnDown, gate_, t, c.intermediate_size);
  b.matmul(l.w_down, l.b_down, gate_, t, out_);
  if (c.post_norms)
    b.rms_norm(out_, l.ffn_post_norm.data(), t, h, static_cast<float>(c.rms_norm_eps), out_);
  b.add(x_, out_, t * h);
}

}  // namespace tern
