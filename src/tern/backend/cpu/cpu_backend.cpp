// CpuBackend: the Backend ops over tern::cpu's matmul, row ops, RoPE, KV cache and paged
// attention, with the memory they work in owned here, one set per decoder: the activations,
// and the scratch only its own ops use (the matmul workspace, the RoPE table of the step, a
// fused matmul's output, the up projection).
#include "tern/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <vector>

#include "tern/backend/cpu/cpu_device.h"
#include "tern/backend/cpu/cpu_kv_cache.h"
#include "tern/backend/cpu/cpu_working_memory.h"
#include "tern/backend/cpu/host_floats.h"
#include "tern/backend/rope_config.h"
#include "tern/core/error.h"
#include "tern/kernels/cpu/matmul.h"
#include "tern/kernels/cpu/ops/rope.h"
#include "tern/kernels/cpu/ops/row_ops.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern {
namespace {

cpu::WeightView view(const WeightMatrix& m) {
  return {m.dtype, m.rows, m.cols, m.data, m.row_bytes, m.packed, m.input_order};
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

// a and b can share one quantization of their input.
bool same_activation(const WeightMatrix& a, const WeightMatrix& b) {
  return a.input_order == b.input_order &&
         (a.dtype == b.dtype ||
          cpu::type_kernels(a.dtype).activation == cpu::type_kernels(b.dtype).activation);
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(const ModelConfig& config, const ModelWeights& weights)
      : config_(config), weights_(weights), rope_(rope_config(config, weights)) {
    // Resolve every matrix's kernels now: an unsupported type fails here, not mid-forward.
    for (const LayerWeights& l : weights.layers)
      for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
        (void)cpu::type_kernels(m->dtype);
    (void)cpu::type_kernels(weights.lm_head.dtype);
    for (const LayerWeights& l : weights.layers)
      has_fused_ =
          has_fused_ || l.wqkv_packed.packed != nullptr || l.w_gate_up_packed.packed != nullptr;
  }

  const Device& device() const override { return cpu_device(); }

  Activation make_activation(int64_t width, ActivationRows rows) override {
    activations_.push_back({width, rows, {}});
    activations_.back().rows.grow(
        width * (rows == ActivationRows::PerToken ? capacity_tokens_ : capacity_rows_));
    return Activation{static_cast<int32_t>(activations_.size() - 1)};
  }

  void reserve(int64_t t, int64_t r) override {
    if (t <= capacity_tokens_ && r <= capacity_rows_) return;
    t = std::max(t, capacity_tokens_);
    r = std::max(r, capacity_rows_);
    for (ActivationBuffer& a : activations_)
      a.rows.grow(a.width * (a.per == ActivationRows::PerToken ? t : r));
    const DecoderBufferSizes s = decoder_buffer_sizes(config_, t, r, has_fused_);
    up_.grow(s.up);
    fused_.grow(s.fused);
    cos_sin_.grow(s.cos_sin);
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

  uint64_t working_bytes() const override {
    int64_t floats = up_.size() + fused_.size() + cos_sin_.size();
    for (const ActivationBuffer& a : activations_) floats += a.rows.size();
    return static_cast<uint64_t>(floats) * sizeof(float) + ws_.capacity();
  }

  std::unique_ptr<KvCache> make_kv_cache(const KvCacheConfig& config) override {
    return std::make_unique<CpuKvCache>(config);
  }

  void check_attention(const AttentionBatch& batch, const KvCache& cache,
                       int n_heads) const override {
    const auto* own = dynamic_cast<const CpuKvCache*>(&cache);
    if (own == nullptr) throw Error("the CPU backend was given a KV cache of another backend");
    cpu::check_attention_batch(batch, own->host(), n_heads);
  }

  void embed(std::span<const int32_t> ids, Activation x) override {
    const int64_t h = weights_.token_embedding.cols;
    float* rows = at(x);
    for (size_t i = 0; i < ids.size(); ++i)
      weights_.embed(ids[i], rows + static_cast<int64_t>(i) * h);
  }

  void set_positions(std::span<const int32_t> positions) override {
    rope_.fill_cos_sin(positions, cos_sin_.data());
  }

  void rms_norm(Activation x, const float* weight, int64_t rows, int64_t dim, float eps,
                Activation out) override {
    cpu::rms_norm(at(x), weight, rows, dim, eps, at(out));
  }

  void rms_norm_rows(Activation x, std::span<const int32_t> rows, const float* weight, int64_t dim,
                     float eps, Activation out) override {
    const float* in = at(x);
    float* normed = at(out);
    for (size_t i = 0; i < rows.size(); ++i)
      cpu::rms_norm(in + rows[i] * dim, weight, 1, dim, eps,
                    normed + static_cast<int64_t>(i) * dim);
  }

  void matmul(const WeightMatrix& w, std::span<const float> bias, Activation x, int64_t t,
              Activation y) override {
    cpu::matmul(view(w), at(x), t, at(y), ws_);
    add_bias(at(y), bias, t);
  }

  void qkv(const WeightMatrix& wq, const WeightMatrix& wk, const WeightMatrix& wv,
           const WeightMatrix& wqkv_packed, std::span<const float> bq, std::span<const float> bk,
           std::span<const float> bv, Activation x_rows, int64_t t, Activation q_rows,
           Activation k_rows, Activation v_rows) override {
    const int64_t h = config_.hidden_size;
    const float* x = at(x_rows);
    float *q = at(q_rows), *k = at(k_rows), *v = at(v_rows);
    if (wqkv_packed.packed != nullptr) {
      // One matmul over the three stacked, then each token's row apart.
      cpu::matmul(view(wqkv_packed), x, t, fused_.data(), ws_);
      const int64_t qd = config_.q_dim(), kvd = config_.kv_dim(), width = qd + 2 * kvd;
      for (int64_t i = 0; i < t; ++i) {
        const float* row = fused_.data() + i * width;
        std::copy(row, row + qd, q + i * qd);
        std::copy(row + qd, row + qd + kvd, k + i * kvd);
        std::copy(row + qd + kvd, row + width, v + i * kvd);
      }
    } else if (same_activation(wq, wk) && same_activation(wq, wv)) {
      // q, k and v share one quantization of their input when their formats agree.
      const cpu::QuantizedActivations a =
          cpu::quantize_activations(wq.dtype, x, t, h, ws_, wq.input_order);
      cpu::matmul(view(wq), a, q);
      cpu::matmul(view(wk), a, k);
      cpu::matmul(view(wv), a, v);
    } else {
      cpu::matmul(view(wq), x, t, q, ws_);
      cpu::matmul(view(wk), x, t, k, ws_);
      cpu::matmul(view(wv), x, t, v, ws_);
    }
    add_bias(q, bq, t);
    add_bias(k, bk, t);
    add_bias(v, bv, t);
  }

  void gate_up_silu(const WeightMatrix& w_gate, const WeightMatrix& w_up,
                    const WeightMatrix& w_gate_up_packed, std::span<const float> b_gate,
                    std::span<const float> b_up, Activation x_rows, int64_t t,
                    Activation out_rows) override {
    const int64_t h = config_.hidden_size, ff = config_.intermediate_size;
    const float* x = at(x_rows);
    float* out = at(out_rows);
    if (w_gate_up_packed.packed != nullptr && b_gate.empty() && b_up.empty()) {
      // One matmul over the two stacked: each token's row is [gate | up], what silu_mul_fused
      // takes.
      cpu::matmul(view(w_gate_up_packed), x, t, fused_.data(), ws_);
      cpu::silu_mul_fused(fused_.data(), t, ff, out);
      return;
    }
    if (same_activation(w_gate, w_up)) {
      const cpu::QuantizedActivations a =
          cpu::quantize_activations(w_gate.dtype, x, t, h, ws_, w_gate.input_order);
      cpu::matmul(view(w_gate), a, out);
      cpu::matmul(view(w_up), a, up_.data());
    } else {
      cpu::matmul(view(w_gate), x, t, out, ws_);
      cpu::matmul(view(w_up), x, t, up_.data(), ws_);
    }
    add_bias(out, b_gate, t);
    add_bias(up_.data(), b_up, t);
    cpu::silu_mul(out, up_.data(), out, t * ff);
  }

  void rope(Activation q, int n_heads, Activation k, int n_kv_heads, int64_t t) override {
    rope_.apply_qk(at(q), n_heads, at(k), n_kv_heads, cos_sin_.data(), t);
  }

  void write_kv(KvCache& cache, int layer, Activation k, Activation v,
                std::span<const int64_t> slot_mapping) override {
    // check_attention has seen that the step's cache is this backend's.
    static_cast<CpuKvCache&>(cache).host().write(layer, at(k), at(v), slot_mapping);
  }

  void attention(Activation q, const KvCache& cache, int layer, const AttentionBatch& batch,
                 int n_heads, float scale, Activation out) override {
    cpu::paged_attention(at(q), static_cast<const CpuKvCache&>(cache).host(), layer, batch, n_heads,
                         scale, at(out));
  }

  void add(Activation x, Activation y, int64_t n) override { cpu::add(at(x), at(y), at(x), n); }

  // The activations are host memory already: lm_head writes the logits where the caller wants
  // them, with no copy.
  void logits(const WeightMatrix& lm_head, Activation x, int64_t rows, float* logits) override {
    cpu::matmul(view(lm_head), at(x), rows, logits, ws_);
  }

  void read_rows(Activation a, int64_t rows, int64_t cols, float* host) override {
    const float* from = at(a);
    std::copy(from, from + rows * cols, host);
  }

 private:
  struct ActivationBuffer {
    int64_t width = 0;
    ActivationRows per = ActivationRows::PerToken;
    HostFloats rows;
  };
  float* at(Activation a) const { return activations_[static_cast<size_t>(a.id)].rows.data(); }

  const ModelConfig& config_;
  const ModelWeights& weights_;
  cpu::Rope rope_;
  cpu::Workspace ws_;
  bool has_fused_ = false;  // some layer has wqkv_packed or w_gate_up_packed
  int64_t capacity_tokens_ = 0;
  int64_t capacity_rows_ = 0;
  std::vector<ActivationBuffer> activations_;  // indexed by Activation::id
  HostFloats up_;       // [T, intermediate]: the up projection beside the gate
  HostFloats fused_;    // [T, q_dim + 2 kv_dim] or [T, 2 intermediate]
  HostFloats cos_sin_;  // [T, head_dim]: RoPE cos/sin of the step's positions
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const ModelConfig& config, const ModelWeights& weights) {
  return std::make_unique<CpuBackend>(config, weights);
}

}  // namespace tern
