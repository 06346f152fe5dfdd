// CpuBackend: the Backend ops over tern::cpu's matmul, row ops, RoPE, KV cache and paged
// attention, with the scratch they need (the matmul workspace, the RoPE table of the step, a
// fused matmul's output, the up projection) owned here, one set per decoder.
#include "tern/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <vector>

#include "tern/backend/decoder_buffers.h"
#include "tern/kernels/cpu/matmul.h"
#include "tern/kernels/cpu/ops/rope.h"
#include "tern/kernels/cpu/ops/row_ops.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern {
namespace {

cpu::WeightView view(const WeightMatrix& m) {
  return {m.dtype, m.rows, m.cols, m.data, m.row_bytes, m.packed, m.input_order};
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

  void reserve(int64_t t, int64_t r) override {
    const auto grow = [](std::vector<float>& v, int64_t n) {
      if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    };
    const DecoderBufferSizes s = decoder_buffer_sizes(config_, t, r, has_fused_);
    grow(up_, s.up);
    grow(fused_, s.fused);
    grow(cos_sin_, s.cos_sin);
    // The matmuls quantize their inputs into ws_; growing it now keeps the first big step from
    // reallocating it matrix by matrix.
    auto shape = [](const WeightMatrix& m) { return MatrixShape{m.dtype, m.rows, m.cols}; };
    std::vector<MatrixShape> shapes;
    for (const LayerWeights& l : weights_.layers)
      for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
        shapes.push_back(shape(*m));
    ws_.reserve(decoder_workspace_bytes(shapes, shape(weights_.lm_head), t, r));
  }

  uint64_t scratch_bytes() const override {
    return (up_.size() + fused_.size() + cos_sin_.size()) * sizeof(float) + ws_.capacity();
  }

  void check_attention(const AttentionBatch& batch, const KvCache& cache,
                       int n_heads) const override {
    cpu::check_attention_batch(batch, cache, n_heads);
  }

  void embed(std::span<const int32_t> ids, float* x) override {
    const int64_t h = weights_.token_embedding.cols;
    for (size_t i = 0; i < ids.size(); ++i) weights_.embed(ids[i], x + static_cast<int64_t>(i) * h);
  }

  void set_positions(std::span<const int32_t> positions) override {
    rope_.fill_cos_sin(positions, cos_sin_.data());
  }

  void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                float* out) override {
    cpu::rms_norm(x, weight, rows, dim, eps, out);
  }

  void rms_norm_rows(const float* x, std::span<const int32_t> rows, const float* weight,
                     int64_t dim, float eps, float* out) override {
    for (size_t i = 0; i < rows.size(); ++i)
      cpu::rms_norm(x + rows[i] * dim, weight, 1, dim, eps, out + static_cast<int64_t>(i) * dim);
  }

  void matmul(const WeightMatrix& w, std::span<const float> bias, const float* x, int64_t t,
              float* y) override {
    cpu::matmul(view(w), x, t, y, ws_);
    add_bias(y, bias, t);
  }

  void qkv(const WeightMatrix& wq, const WeightMatrix& wk, const WeightMatrix& wv,
           const WeightMatrix& wqkv_packed, std::span<const float> bq, std::span<const float> bk,
           std::span<const float> bv, const float* x, int64_t t, float* q, float* k,
           float* v) override {
    const int64_t h = config_.hidden_size;
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
                    std::span<const float> b_up, const float* x, int64_t t, float* out) override {
    const int64_t h = config_.hidden_size, ff = config_.intermediate_size;
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

  void rope(float* q, int n_heads, float* k, int n_kv_heads, int64_t t) override {
    rope_.apply_qk(q, n_heads, k, n_kv_heads, cos_sin_.data(), t);
  }

  void write_kv(KvCache& cache, int layer, const float* k, const float* v,
                std::span<const int64_t> slot_mapping) override {
    cache.write(layer, k, v, slot_mapping);
  }

  void attention(const float* q, const KvCache& cache, int layer, const AttentionBatch& batch,
                 int n_heads, float scale, float* out) override {
    cpu::paged_attention(q, cache, layer, batch, n_heads, scale, out);
  }

  void add(float* x, const float* y, int64_t n) override { cpu::add(x, y, x, n); }

 private:
  const ModelConfig& config_;
  const ModelWeights& weights_;
  cpu::Rope rope_;
  cpu::Workspace ws_;
  bool has_fused_ = false;      // some layer has wqkv_packed or w_gate_up_packed
  std::vector<float> up_;       // [T, intermediate]: the up projection beside the gate
  std::vector<float> fused_;    // [T, q_dim + 2 kv_dim] or [T, 2 intermediate]
  std::vector<float> cos_sin_;  // [T, head_dim]: RoPE cos/sin of the step's positions
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const ModelConfig& config, const ModelWeights& weights) {
  return std::make_unique<CpuBackend>(config, weights);
}

}  // namespace tern
