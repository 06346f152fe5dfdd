// The llama / qwen2 / qwen3 / qwen3moe decoder as one forward pass with feature flags from
// ModelConfig (q/k/v bias, q/k RMSNorm, rope layout and scaling, a mixture of experts in place of
// the MLP), over a flat batch and the paged KV cache.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tern/backend/backend.h"
#include "tern/backend/device.h"
#include "tern/formats/model_config.h"
#include "tern/models/language_model.h"
#include "tern/models/step_context.h"
#include "tern/models/weight_loader.h"

namespace tern {

class Decoder final : public LanguageModel {
 public:
  // Holds references: `config` and `weights` (prepared for `device`) must outlive the decoder.
  // Throws tern::Error when the weights do not fit the config's shapes, the rope settings are
  // invalid or the device has no kernels for a matrix's type.
  Decoder(const ModelConfig& config, const ModelWeights& weights, const Device& device);
  // The same on `backend`, made for this config and weights.
  Decoder(const ModelConfig& config, const ModelWeights& weights, std::unique_ptr<Backend> backend);

  // One step: embeds the tokens, runs every layer (writing each token's K/V at its slot), and
  // writes the logits of ctx.logit_rows (LanguageModel::forward).
  void forward(const StepContext& ctx, KvCache& cache, float* logits) override;
  void check_step(const StepContext& ctx, const KvCache& cache) const override;
  void reserve(int64_t num_tokens, int64_t num_logit_rows) override;
  uint64_t buffer_bytes() const override { return backend_->working_bytes(); }
  // With experts, also has the backend capture each sparse layer's routes (Backend::capture_moe),
  // which throws tern::Error on a backend that cannot.
  void set_observer(ActivationObserver* observer) override;

  const ModelConfig& config() const override { return config_; }
  const ModelWeights& weights() const override { return weights_; }
  const Device& device() const override { return backend_->device(); }
  Backend& backend() { return *backend_; }

 protected:
  std::unique_ptr<KvCache> allocate_kv_cache(const KvCacheConfig& config) override {
    return backend_->make_kv_cache(config);
  }

 private:
  void observe(int layer, MatrixInput input, Activation x, int64_t num_tokens, int64_t cols);
  void attention_block(int layer, const StepContext& ctx, KvCache& cache);
  void mlp_block(int layer, int64_t num_tokens);

  const ModelConfig& config_;
  const ModelWeights& weights_;
  std::unique_ptr<Backend> backend_;
  ActivationObserver* observer_ = nullptr;

  // The forward's activations, in the backend's memory; f32 throughout. The backend keeps
  // what only its own ops use.
  Activation x_;                 // [T, hidden]: the residual stream
  Activation xn_;                // [T, hidden]: normed input of a block
  Activation q_;                 // [T, n_heads, head_dim]
  Activation k_;                 // [T, n_kv_heads, head_dim]
  Activation v_;                 // [T, n_kv_heads, head_dim]
  Activation attn_;              // [T, n_heads, head_dim]
  Activation out_;               // [T, hidden]: a block's output before the residual add
  Activation gate_;              // [T, intermediate]: silu(gate) · up (dense layers)
  Activation final_;             // [R, hidden]: normed rows whose logits are wanted
  std::vector<float> observed_;  // the host copy an observer reads (only with one)
  MoeCapture moe_capture_;       // a sparse layer's routes, filled only with an observer
};

}  // namespace tern
