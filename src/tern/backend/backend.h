// The seam between what a decoder computes and the device that computes it: the handful of ops a
// forward is made of, each one call per layer (or per step) covering every token of the batch,
// so the virtual dispatch is nothing next to the work. The backend owns the memory they work
// in: activations, scratch and the KV cache are its own (device memory on a GPU, aligned host
// memory on the CPU); the host hands it token ids, positions and block tables, and reads back
// the logit rows, once per step. The CPU's implementation is backend/cpu/cpu_backend.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tern/backend/kv_cache.h"
#include "tern/backend/kv_types.h"
#include "tern/weights/model_weights.h"
#include "tern/weights/weight_matrix.h"

namespace tern {

class Device;  // device.h

// A buffer of f32 activation rows in the backend's memory, made by Backend::make_activation.
// Ops name it; only read_rows and logits copy anything to the host.
struct Activation {
  int32_t id = -1;
};

// What an activation's rows are counted in: one per token of the step, or one per logit row.
enum class ActivationRows { PerToken, PerLogitRow };

// What a mixture of experts' layer computed besides its output, copied to host memory for tools
// that look at the experts' inputs (`tern imatrix`, per expert): Backend::capture_moe.
struct MoeCapture {
  int64_t tokens = 0, top_k = 0, num_experts = 0;
  // [tokens · top_k]: route token · top_k + j's expert, the token's j-th choice.
  std::vector<int32_t> route_experts;
  // [tokens · top_k, expert_ff]: what each route's expert's down projection read, act(gate) · up
  // (gpt-oss's clamped activation with its biases included).
  int64_t expert_ff = 0;
  std::vector<float> expert_down_inputs;
  // [tokens, shared_ff]: the shared expert's down projection's input (qwen2moe), else empty.
  int64_t shared_ff = 0;
  std::vector<float> shared_down_inputs;
};

// One decoder's ops on one device. An instance belongs to one Decoder (made for its config and
// weights, which outlive it). Hot-path calls never throw or allocate once reserve() has seen the
// step's size. Not thread-safe: one engine loop drives it.
class Backend {
 public:
  virtual ~Backend() = default;

  // The device it runs on (what made it).
  virtual const Device& device() const = 0;

  // A buffer of `width` floats per row, `rows` rows per step; reserve() sizes it. Made before
  // the first forward (it may allocate).
  virtual Activation make_activation(int64_t width, ActivationRows rows) = 0;
  // Grows every activation and the scratch for steps of up to `num_tokens` tokens and
  // `num_logit_rows` logit rows.
  virtual void reserve(int64_t num_tokens, int64_t num_logit_rows) = 0;
  // Bytes of activations and scratch held now: what `tern plan` counts as the decoder's part of
  // the working memory.
  virtual uint64_t working_bytes() const = 0;

  // A KV cache of `config`'s shape in this backend's memory, zeroed. Throws tern::Error on a
  // bad config or when the memory is not there.
  virtual std::unique_ptr<KvCache> make_kv_cache(const KvCacheConfig& config) = 0;
  // Throws tern::Error naming the first inconsistency of `batch` against `cache` (or a cache
  // another kind of backend made).
  virtual void check_attention(const AttentionBatch& batch, const KvCache& cache,
                               int n_heads) const = 0;

  // x: [T, hidden] ← the embedding rows of token_ids [T] (ids already checked), times the
  // config's embedding_scale (Gemma's √hidden) where it is not 1.
  virtual void embed(std::span<const int32_t> token_ids, Activation x) = 0;

  // The step's token positions [T], once per step: every layer's rope() rotates by them.
  virtual void set_positions(std::span<const int32_t> positions) = 0;

  // out[r, :] = x[r, :] / rms(x[r, :]) · weight. x, out: [rows, dim]; weight: [dim]. out may
  // be x.
  virtual void rms_norm(Activation x, const float* weight, int64_t rows, int64_t dim, float eps,
                        Activation out) = 0;
  // The same for the rows of x listed in `rows` (the final norm of the logit rows only).
  // x: [T, dim]; rows: [R]; out: [R, dim]
  virtual void rms_norm_rows(Activation x, std::span<const int32_t> rows, const float* weight,
                             int64_t dim, float eps, Activation out) = 0;

  // y = x · wᵀ (+ bias). x: [t, w.cols]; y: [t, w.rows]; bias: [w.rows] or empty.
  virtual void matmul(const WeightMatrix& w, std::span<const float> bias, Activation x, int64_t t,
                      Activation y) = 0;
  // A layer's q, k and v from one input, biases included: a backend may share the input's
  // quantization or run one fused matmul. x: [t, hidden]; q: [t, q_dim]; k, v: [t, kv_dim]
  // `wqkv_packed`: the three stacked where the loader packed them back to back (only its
  // `packed` set; empty() otherwise). bq, bk, bv: empty without attention_bias.
  virtual void qkv(const WeightMatrix& wq, const WeightMatrix& wk, const WeightMatrix& wv,
                   const WeightMatrix& wqkv_packed, std::span<const float> bq,
                   std::span<const float> bk, std::span<const float> bv, Activation x, int64_t t,
                   Activation q, Activation k, Activation v) = 0;
  // The MLP's activation: out = act(x · w_gateᵀ + b_gate) · (x · w_upᵀ + b_up), act the
  // config's MlpActivation (SiLU, or Gemma's tanh GELU).
  // x: [t, hidden]; out: [t, intermediate]
  // `w_gate_up_packed`: the two stacked, as `wqkv_packed`. b_gate, b_up: empty without mlp_bias.
  virtual void gate_up(const WeightMatrix& w_gate, const WeightMatrix& w_up,
                       const WeightMatrix& w_gate_up_packed, std::span<const float> b_gate,
                       std::span<const float> b_up, Activation x, int64_t t, Activation out) = 0;

  // A sparse layer's MLP (a mixture of experts). Each token's router probabilities are the
  // softmax of x · routerᵀ; it takes the top_k experts (the higher probability first, the lower
  // index on a tie), their probabilities as weights (renormalised to sum 1 when
  // normalize_top_k), and out = Σ weight · down_e(silu(gate_e x) · up_e x) over its experts in
  // that order, so a token's result never depends on the other tokens of the step. A shared
  // expert (qwen2moe's) adds sigmoid(x · gate_weight) · down_s(silu(gate_s x) · up_s x).
  // A chosen expert's matrices are read once per step for all its tokens; an expert no token
  // chose is not read. x: [t, hidden]; out: [t, hidden]
  virtual void moe_mlp(const MixtureOfExperts& moe, Activation x, int64_t t, Activation out) = 0;
  // From now on each moe_mlp also copies its routing and its experts' intermediates into
  // `*host` (nullptr: stop; the default), for tools only: a forward without a capture copies
  // nothing. Capturing may allocate (the host vectors grow). Throws tern::Error, by name, on a
  // backend that cannot capture them.
  virtual void capture_moe(MoeCapture* host) = 0;

  // Rotates q and k of `layer` in place by the positions of set_positions: by the config's
  // rope_theta and scaling, or in a layer where ModelConfig::local_rope (Gemma 3's sliding
  // ones) by rope_local_theta unscaled.
  // q: [t, n_heads, head_dim]; k: [t, n_kv_heads, head_dim]
  virtual void rope(int layer, Activation q, int n_heads, Activation k, int n_kv_heads,
                    int64_t t) = 0;

  // Stores each token's K and V of `layer` at its slot (-1: skip).
  // k, v: [t, n_kv_heads, head_dim]; slot_mapping: [t]
  virtual void write_kv(KvCache& cache, int layer, Activation k, Activation v,
                        std::span<const int64_t> slot_mapping) = 0;
  // Causal paged attention of every query token over its sequence's cached K/V: all of its
  // context (window 0), or its last `window` keys, its own included (sliding-window attention).
  // `sinks` (empty, or one logit per q head: gpt-oss's) join each head's softmax as a key with
  // no value.
  // q, out: [t, n_heads, head_dim]
  virtual void attention(Activation q, const KvCache& cache, int layer, const AttentionBatch& batch,
                         int n_heads, float scale, int32_t window, std::span<const float> sinks,
                         Activation out) = 0;

  // The residual connection: x[i] += y[i]. x, y: [n]
  virtual void add(Activation x, Activation y, int64_t n) = 0;

  // The step's last op: logits = x · lm_headᵀ, written to host memory — the one read back of a
  // step (a device backend finishes the step's work here and waits for it).
  // x: [rows, lm_head.cols]; logits: [rows, lm_head.rows]
  virtual void logits(const WeightMatrix& lm_head, Activation x, int64_t rows, float* logits) = 0;

  // Copies the first rows × `cols` floats of `a` to host memory, for tools that look at
  // activations (`tern imatrix`); a forward without such a tool never calls it.
  virtual void read_rows(Activation a, int64_t rows, int64_t cols, float* host) = 0;
};

}  // namespace tern
