// The llama / qwen2 / qwen3 decoder as one forward pass with feature flags from ModelConfig
// (q/k/v bias, q/k RMSNorm, rope layout and scaling), over a flat batch and the paged KV cache.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tern/backend/backend.h"
#include "tern/backend/device.h"
#include "tern/formats/model_config.h"
#include "tern/models/step_context.h"
#include "tern/models/weight_loader.h"

namespace tern {

// The inputs of a layer's weight matrices, as a forward computes them.
enum class MatrixInput {
  AttnQkv,     // attn_q, attn_k, attn_v: the attention block's normed input [hidden]
  AttnOutput,  // attn_output: the heads' outputs [q_dim]
  FfnGateUp,   // ffn_gate, ffn_up: the MLP block's normed input [hidden]
  FfnDown,     // ffn_down: silu(gate) · up [intermediate]
  LmHead,      // output.weight: the final-normed rows whose logits are wanted [hidden]
};

// Sees every matrix input of each forward (`tern imatrix` sums their squares). Called on the
// forward's thread, between the kernels.
class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  // x: [num_tokens, cols] f32. layer is -1 for LmHead.
  virtual void observe(int layer, MatrixInput input, const float* x, int64_t num_tokens,
                       int64_t cols) = 0;
};

class Decoder {
 public:
  // Holds references: `config` and `weights` (prepared for `device`) must outlive the decoder.
  // Throws tern::Error when the weights do not fit the config's shapes, the rope settings are
  // invalid or the device has no kernels for a matrix's type.
  Decoder(const ModelConfig& config, const ModelWeights& weights, const Device& device);
  // The same on `backend`, made for this config and weights.
  Decoder(const ModelConfig& config, const ModelWeights& weights, std::unique_ptr<Backend> backend);

  // One step: embeds the tokens, runs every layer (writing each token's K/V at its slot), and
  // writes the logits of ctx.logit_rows, in order, to host memory.
  // logits: [num_logit_rows, vocab_size]
  // The cache must be one make_kv_cache made. Never throws or allocates once the buffers have
  // grown to the largest batch seen; the caller has checked the token ids, slots and block
  // tables (check_step does).
  void forward(const StepContext& ctx, KvCache& cache, float* logits);

  // Throws tern::Error naming the first token id outside the vocabulary, bad slot or block
  // table entry of `ctx` against `cache`.
  void check_step(const StepContext& ctx, const KvCache& cache) const;

  // A cache of this model's shape.
  KvCacheConfig kv_cache_config(int64_t num_blocks, int block_size = 16,
                                KvDtype dtype = KvDtype::F16) const;
  // Such a cache in the backend's memory (Backend::make_kv_cache).
  std::unique_ptr<KvCache> make_kv_cache(int64_t num_blocks, int block_size = 16,
                                         KvDtype dtype = KvDtype::F16);

  // Grows the activation buffers for batches of up to `num_tokens` tokens and `num_logit_rows`
  // logit rows (forward does it too; call it up front to keep the first step fast).
  void reserve(int64_t num_tokens, int64_t num_logit_rows);

  // Bytes the backend's activations and scratch (the matmul workspace among it) hold now: what
  // `tern plan` counts as the decoder's part of the working memory (Device::working_bytes).
  uint64_t buffer_bytes() const { return backend_->working_bytes(); }

  // Shows every forward's matrix inputs to `observer` (nullptr: none), copied to the host; it
  // must outlive its use. Without one a forward copies nothing.
  void set_observer(ActivationObserver* observer) { observer_ = observer; }

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  Backend& backend() { return *backend_; }
  const Device& device() const { return backend_->device(); }

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
  Activation gate_;              // [T, intermediate]: silu(gate) · up
  Activation final_;             // [R, hidden]: normed rows whose logits are wanted
  std::vector<float> observed_;  // the host copy an observer reads (only with one)
};

}  // namespace tern
