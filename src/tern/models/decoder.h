// The llama / qwen2 / qwen3 decoder as one forward pass with feature flags from ModelConfig
// (q/k/v bias, q/k RMSNorm, rope layout and scaling), over a flat batch and the paged KV cache.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tern/backend/backend.h"
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
  // Holds references: `config` and `weights` must outlive the decoder. Throws tern::Error when
  // the weights do not fit the config's shapes or the rope settings are invalid. Runs on the
  // CPU backend (make_cpu_backend).
  Decoder(const ModelConfig& config, const ModelWeights& weights);
  // The same on `backend`, made for this config and weights.
  Decoder(const ModelConfig& config, const ModelWeights& weights, std::unique_ptr<Backend> backend);

  // One step: embeds the tokens, runs every layer (writing each token's K/V at its slot), and
  // writes the logits of ctx.logit_rows, in order.
  // logits: [num_logit_rows, vocab_size]
  // The cache must have this model's shape (kv_cache_config). Never throws or allocates once
  // the buffers have grown to the largest batch seen; the caller has checked the token ids,
  // slots and block tables (check_step does).
  void forward(const StepContext& ctx, KvCache& cache, float* logits);

  // Throws tern::Error naming the first token id outside the vocabulary, bad slot or block
  // table entry of `ctx` against `cache`.
  void check_step(const StepContext& ctx, const KvCache& cache) const;

  // A cache of this model's shape.
  KvCacheConfig kv_cache_config(int64_t num_blocks, int block_size = 16,
                                KvDtype dtype = KvDtype::F16) const;

  // Grows the activation buffers for batches of up to `num_tokens` tokens and `num_logit_rows`
  // logit rows (forward does it too; call it up front to keep the first step fast).
  void reserve(int64_t num_tokens, int64_t num_logit_rows);

  // Bytes the activation buffers and the backend's scratch (the matmul workspace among it) hold
  // now: what `tern plan` counts as the decoder's part of the working memory
  // (backend/decoder_buffers.h).
  uint64_t buffer_bytes() const;

  // Shows every forward's matrix inputs to `observer` (nullptr: none); it must outlive its use.
  void set_observer(ActivationObserver* observer) { observer_ = observer; }

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  Backend& backend() { return *backend_; }

 private:
  void observe(int layer, MatrixInput input, const float* x, int64_t num_tokens, int64_t cols) {
    if (observer_ != nullptr) observer_->observe(layer, input, x, num_tokens, cols);
  }
  void attention_block(int layer, const StepContext& ctx, KvCache& cache);
  void mlp_block(int layer, int64_t num_tokens);

  const ModelConfig& config_;
  const ModelWeights& weights_;
  std::unique_ptr<Backend> backend_;
  ActivationObserver* observer_ = nullptr;

  // Activations, grown to the largest batch (T tokens, R logit rows). f32 throughout; the
  // backend keeps what only its own ops use (decoder_buffer_sizes names both).
  int64_t capacity_tokens_ = 0;
  int64_t capacity_rows_ = 0;
  std::vector<float> x_;      // [T, hidden]: the residual stream
  std::vector<float> xn_;     // [T, hidden]: normed input of a block
  std::vector<float> q_;      // [T, n_heads, head_dim]
  std::vector<float> k_;      // [T, n_kv_heads, head_dim]
  std::vector<float> v_;      // [T, n_kv_heads, head_dim]
  std::vector<float> attn_;   // [T, n_heads, head_dim]
  std::vector<float> out_;    // [T, hidden]: a block's output before the residual add
  std::vector<float> gate_;   // [T, intermediate]: silu(gate) · up
  std::vector<float> final_;  // [R, hidden]: normed rows whose logits are wanted
};

}  // namespace tern
