// What the engine, the speculative proposers, the evaluation tools and the KV transfer run: a
// model as one forward over a flat batch of tokens and the paged KV cache, on one device. The
// llama / qwen2 / qwen3 Decoder is one; another architecture (a mixture of experts, Gemma) is
// another class here, with nothing above models/ changing.
#pragma once

#include <cstdint>
#include <memory>

#include "tern/backend/backend.h"
#include "tern/backend/device.h"
#include "tern/backend/kv_cache.h"
#include "tern/formats/model_config.h"
#include "tern/models/step_context.h"
#include "tern/weights/model_weights.h"

namespace tern {

// The inputs of a layer's weight matrices, as a forward computes them.
enum class MatrixInput {
  AttnQkv,     // attn_q, attn_k, attn_v: the attention block's normed input [hidden]
  AttnOutput,  // attn_output: the heads' outputs [q_dim]
  FfnGateUp,   // ffn_gate, ffn_up: the MLP block's normed input [hidden]
  FfnDown,     // ffn_down: silu(gate) · up [intermediate]
  // A sparse layer's (mixture of experts') normed input [hidden]: what its router
  // (ffn_gate_inp) and its shared expert's gate and up (ffn_gate_shexp, ffn_up_shexp) read. Its
  // experts' inputs come to observe_experts.
  MoeInput,
  SharedDown,  // ffn_down_shexp: the shared expert's silu(gate) · up [shared_ff]
  LmHead,      // output.weight: the final-normed rows whose logits are wanted [hidden]
};

// Sees every matrix input of each forward (`tern imatrix` sums their squares). Called on the
// forward's thread, between the kernels, with a host copy of the rows.
class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  // x: [num_tokens, cols] f32. layer is -1 for LmHead.
  virtual void observe(int layer, MatrixInput input, const float* x, int64_t num_tokens,
                       int64_t cols) = 0;
  // A sparse layer's experts, after its MoeInput: x [moe.tokens, hidden] the normed input every
  // chosen expert's gate and up read (ffn_gate_exps, ffn_up_exps), and `moe` the routes and
  // what each route's down projection (ffn_down_exps) read.
  virtual void observe_experts(int layer, const float* x, int64_t hidden,
                               const MoeCapture& moe) = 0;
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  // One step: every token of ctx through the model (each token's K/V written at its slot), and
  // the logits of ctx.logit_rows, in order, written to host memory.
  // logits: [num_logit_rows, vocab_size]
  // The cache must be one make_kv_cache made. Never throws or allocates once the buffers have
  // grown to the largest batch seen; the caller has checked the step (check_step).
  virtual void forward(const StepContext& ctx, KvCache& cache, float* logits) = 0;

  // Throws tern::Error naming the first token id outside the vocabulary, bad slot or block
  // table entry of `ctx` against `cache`.
  virtual void check_step(const StepContext& ctx, const KvCache& cache) const = 0;

  // Grows the buffers for batches of up to `num_tokens` tokens and `num_logit_rows` logit rows
  // (forward does it too; call it up front to keep the first step fast).
  virtual void reserve(int64_t num_tokens, int64_t num_logit_rows) = 0;
  // Bytes of activations and scratch held now: what `tern plan` counts as the model's part of
  // the working memory (Device::working_bytes).
  virtual uint64_t buffer_bytes() const = 0;

  // Shows every forward's matrix inputs to `observer` (nullptr: none), copied to the host; it
  // must outlive its use. Without one a forward copies nothing.
  virtual void set_observer(ActivationObserver* observer) = 0;

  virtual const ModelConfig& config() const = 0;
  virtual const ModelWeights& weights() const = 0;
  virtual const Device& device() const = 0;

  // The shape of this model's caches (num_blocks blocks of block_size tokens of dtype).
  KvCacheConfig kv_cache_config(int64_t num_blocks, int block_size = 16,
                                KvDtype dtype = KvDtype::F16) const;
  // Such a cache in the device's memory.
  std::unique_ptr<KvCache> make_kv_cache(int64_t num_blocks, int block_size = 16,
                                         KvDtype dtype = KvDtype::F16) {
    return allocate_kv_cache(kv_cache_config(num_blocks, block_size, dtype));
  }

 protected:
  // A cache of `config` (this model's shape) from its backend.
  virtual std::unique_ptr<KvCache> allocate_kv_cache(const KvCacheConfig& config) = 0;
};

}  // namespace tern
