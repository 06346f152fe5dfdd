// CpuBackend: the Backend ops over tern::cpu's matmul, row ops, RoPE, KV cache and paged
// attention, with the memory they work in owned here, one set per decoder: the activations,
// and the scratch only its own ops use (the matmul workspace, the RoPE table of the step, a
// fused matmul's output, the up projection).
#include "tern/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tern/backend/cpu/cpu_device.h"
#include "tern/backend/cpu/cpu_kv_cache.h"
#include "tern/backend/cpu/cpu_working_memory.h"
#include "tern/backend/cpu/host_floats.h"
#include "tern/backend/rope_config.h"
#include "tern/core/error.h"
#include "tern/kernels/cpu/matmul.h"
#include "tern/kernels/cpu/ops/expert_routing.h"
#include "tern/kernels/cpu/ops/rope.h"
#include "tern/kernels/cpu/ops/row_ops.h"
#include "tern/kernels/cpu/stealing_split.h"
#include "tern/kernels/cpu/thread_team.h"
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

// Expert e's slice of stacked per-expert biases [n_experts · width] (empty stays empty).
std::span<const float> expert_bias(std::span<const float> stacked, size_t e, int64_t width) {
  return stacked.empty()
             ? stacked
             : stacked.subspan(e * static_cast<size_t>(width), static_cast<size_t>(width));
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
      : config_(config),
        weights_(weights),
        rope_(rope_config(config, weights)),
        local_rope_(local_rope_config(config, weights)) {
    // Resolve every matrix's kernels now: an unsupported type fails here, not mid-forward.
    for (const LayerWeights& l : weights.layers)
      l.for_each_matrix([](const WeightMatrix& m) { (void)cpu::type_kernels(m.dtype); });
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
    if (config_.num_experts > 0) {
      const auto routes = static_cast<size_t>(t * config_.num_experts_per_tok);
      router_.grow(s.router);
      expert_rows_.grow(s.expert_rows);
      expert_gate_.grow(s.expert_ff / 2);
      expert_up_.grow(s.expert_ff / 2);
      route_weights_.grow(static_cast<int64_t>(routes));
      route_experts_.resize(routes);
      expert_routes_.resize(routes);
      route_slots_.resize(routes);
      expert_first_.resize(static_cast<size_t>(config_.num_experts + 1));
      active_experts_.resize(static_cast<size_t>(config_.num_experts));
    }
    // The matmuls quantize their inputs into ws_; growing it now keeps the first big step from
    // reallocating it matrix by matrix.
    auto shape = [](const WeightMatrix& m) { return MatrixShape{m.dtype, m.rows, m.cols}; };
    std::vector<MatrixShape> shapes;
    for (const LayerWeights& l : weights_.layers)
      l.for_each_matrix([&](const WeightMatrix& m) { shapes.push_back(shape(m)); });
    const uint64_t ws_bytes = decoder_workspace_bytes(shapes, shape(weights_.lm_head), t, r);
    ws_.reserve(ws_bytes);
    expert_ws_.resize(static_cast<size_t>(decoder_workspace_count(config_) - 1));
    for (cpu::Workspace& w : expert_ws_) w.reserve(ws_bytes);
    capacity_tokens_ = t;
    capacity_rows_ = r;
  }

  uint64_t working_bytes() const override {
    int64_t floats = up_.size() + fused_.size() + cos_sin_.size() + router_.size() +
                     expert_rows_.size() + expert_gate_.size() + expert_up_.size() +
                     route_weights_.size() +
                     static_cast<int64_t>(route_experts_.size() + expert_routes_.size() +
                                          route_slots_.size() + expert_first_.size());
    for (const ActivationBuffer& a : activations_) floats += a.rows.size();
    uint64_t workspaces = ws_.capacity();
    for (const cpu::Workspace& w : expert_ws_) workspaces += w.capacity();
    return static_cast<uint64_t>(floats) * sizeof(float) + workspaces;
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
    if (const auto scale = static_cast<float>(config_.embedding_scale); scale != 1.0f)
      for (int64_t i = 0; i < h * static_cast<int64_t>(ids.size()); ++i) rows[i] *= scale;
  }

  void set_positions(std::span<const int32_t> positions) override {
    rope_.fill_cos_sin(positions, cos_sin_.data());
    if (config_.rope_local_theta > 0)
      local_rope_.fill_cos_sin(positions, local_cos_sin(static_cast<int64_t>(positions.size())));
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

  void gate_up(const WeightMatrix& w_gate, const WeightMatrix& w_up,
               const WeightMatrix& w_gate_up_packed, std::span<const float> b_gate,
               std::span<const float> b_up, Activation x_rows, int64_t t,
               Activation out_rows) override {
    const int64_t ff = config_.intermediate_size;
    const bool gelu = config_.mlp_activation == MlpActivation::GeluTanh;
    const float* x = at(x_rows);
    float* out = at(out_rows);
    if (w_gate_up_packed.packed != nullptr && b_gate.empty() && b_up.empty()) {
      // One matmul over the two stacked: each token's row is [gate | up], what the fused
      // activations take.
      cpu::matmul(view(w_gate_up_packed), x, t, fused_.data(), ws_);
      if (gelu) return cpu::gelu_tanh_mul_fused(fused_.data(), t, ff, out);
      return cpu::silu_mul_fused(fused_.data(), t, ff, out);
    }
    gate_and_up(w_gate, w_up, x, t, out, up_.data(), ws_);
    add_bias(out, b_gate, t);
    add_bias(up_.data(), b_up, t);
    if (gelu)
      cpu::gelu_tanh_mul(out, up_.data(), out, t * ff);
    else
      cpu::silu_mul(out, up_.data(), out, t * ff);
  }

  void moe_mlp(const MixtureOfExperts& moe, Activation x_rows, int64_t t,
               Activation out_rows) override {
    const int64_t h = config_.hidden_size, n = moe.num_experts(), k = moe.top_k;
    const float* x = at(x_rows);
    float* out = at(out_rows);
    // The shared expert first, into `out`: the routed experts reuse its gate and up buffers.
    if (const std::optional<SharedExpert>& s = moe.shared) {
      const int64_t ff = s->gate.rows;
      gate_and_up(s->gate, s->up, x, t, expert_gate_.data(), expert_up_.data(), ws_);
      cpu::silu_mul(expert_gate_.data(), expert_up_.data(), expert_gate_.data(), t * ff);
      if (capture_ != nullptr) {
        capture_->shared_ff = ff;
        capture_->shared_down_inputs.assign(expert_gate_.data(), expert_gate_.data() + t * ff);
      }
      cpu::matmul(view(s->down), expert_gate_.data(), t, out, ws_);
    } else if (capture_ != nullptr) {
      capture_->shared_ff = 0;
      capture_->shared_down_inputs.clear();
    }
    cpu::matmul(view(moe.router), x, t, router_.data(), ws_);
    add_bias(router_.data(), moe.router_bias, t);
    cpu::route_top_k(router_.data(), t, n, k, moe.normalize_top_k, route_experts_.data(),
                     route_weights_.data());
    cpu::group_by_expert(route_experts_.data(), t * k, n, expert_first_.data(),
                         expert_routes_.data(), route_slots_.data());
    int64_t active = 0;
    for (int64_t e = 0; e < n; ++e)
      if (expert_first_[static_cast<size_t>(e + 1)] > expert_first_[static_cast<size_t>(e)])
        active_experts_[static_cast<size_t>(active++)] = static_cast<int32_t>(e);

    // Each chosen expert over its routes' rows, in its own slice of the grouped buffers. Many
    // experts (a prefill, or 8 of 128 on 2 threads): side by side, each expert's matmuls on one
    // thread, one job for the layer rather than three per expert. Few: one after another, each
    // matmul shared by the team. A row's bits are the same either way.
    const auto run_expert = [&](int64_t i, cpu::Workspace& ws) {
      const auto e = static_cast<size_t>(active_experts_[static_cast<size_t>(i)]);
      const int32_t begin = expert_first_[e];
      const int64_t rows = expert_first_[e + 1] - begin, ff = moe.gate[e].rows;
      float* in = expert_rows_.data() + begin * h;
      for (int64_t r = 0; r < rows; ++r) {
        const float* token = x + expert_routes_[static_cast<size_t>(begin + r)] / k * h;
        std::copy(token, token + h, in + r * h);
      }
      float* gate = expert_gate_.data() + begin * ff;
      float* up = expert_up_.data() + begin * ff;
      gate_and_up(moe.gate[e], moe.up[e], in, rows, gate, up, ws);
      add_bias(gate, expert_bias(moe.gate_bias, e, ff), rows);
      add_bias(up, expert_bias(moe.up_bias, e, ff), rows);
      if (moe.swiglu_limit > 0)
        cpu::clamped_swiglu(gate, up, gate, rows * ff, moe.swiglu_limit);
      else
        cpu::silu_mul(gate, up, gate, rows * ff);
      cpu::matmul(view(moe.down[e]), gate, rows, in, ws);  // its input rows are done with
      add_bias(in, expert_bias(moe.down_bias, e, h), rows);
    };
    const int threads = cpu::team_threads();
    if (active >= 2 * threads && threads <= static_cast<int>(expert_ws_.size())) {
      cpu::StealingSplit split = cpu::StealingSplit::even(threads, active);
      cpu::run_team(split.threads(), [&](int member) {
        for (cpu::StealingSplit::Range r; (r = split.next(member)).count > 0;)
          run_expert(r.first, expert_ws_[static_cast<size_t>(member)]);
      });
    } else {
      for (int64_t i = 0; i < active; ++i) run_expert(i, ws_);
    }
    if (capture_ != nullptr) capture_routes(moe, t);

    // Each token's shared expert scaled by its gate, plus the weighted sum over its choices in
    // the router's order: its own, whoever shares the step.
    const std::span<const float> shared_gate =
        moe.shared ? moe.shared->gate_weight : std::span<const float>();
    cpu::parallel_for(t, [&](int64_t token) {
      float* o = out + token * h;
      if (shared_gate.empty()) {
        std::fill(o, o + h, 0.0f);
      } else {
        const float* xt = x + token * h;
        double z = 0;
        for (int64_t c = 0; c < h; ++c) z += static_cast<double>(xt[c]) * shared_gate[c];
        const auto g = static_cast<float>(1.0 / (1.0 + std::exp(-z)));
        for (int64_t c = 0; c < h; ++c) o[c] *= g;
      }
      for (int64_t route = token * k; route < (token + 1) * k; ++route) {
        const float w = route_weights_.data()[route];
        const float* y = expert_rows_.data() + route_slots_[static_cast<size_t>(route)] * h;
        for (int64_t c = 0; c < h; ++c) o[c] += w * y[c];
      }
    });
  }

  void capture_moe(MoeCapture* host) override { capture_ = host; }

  void rope(int layer, Activation q, int n_heads, Activation k, int n_kv_heads,
            int64_t t) override {
    if (config_.local_rope(layer))
      local_rope_.apply_qk(at(q), n_heads, at(k), n_kv_heads, local_cos_sin(t), t);
    else
      rope_.apply_qk(at(q), n_heads, at(k), n_kv_heads, cos_sin_.data(), t);
  }

  void write_kv(KvCache& cache, int layer, Activation k, Activation v,
                std::span<const int64_t> slot_mapping) override {
    // check_attention has seen that the step's cache is this backend's.
    static_cast<CpuKvCache&>(cache).host().write(layer, at(k), at(v), slot_mapping);
  }

  void attention(Activation q, const KvCache& cache, int layer, const AttentionBatch& batch,
                 int n_heads, float scale, int32_t window, std::span<const float> sinks,
                 Activation out) override {
    cpu::paged_attention(at(q), static_cast<const CpuKvCache&>(cache).host(), layer, batch, n_heads,
                         scale, window, sinks.empty() ? nullptr : sinks.data(), at(out));
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
  // The local RoPE's table of a step of t tokens: after the global one in cos_sin_.
  float* local_cos_sin(int64_t t) { return cos_sin_.data() + t * config_.head_dim; }

  // The routes of the moe_mlp just run, and what each one's down projection read (still in
  // expert_gate_, at the route's slot), into capture_ in the routes' order.
  void capture_routes(const MixtureOfExperts& moe, int64_t t) {
    const int64_t k = moe.top_k, ff = moe.gate.empty() ? 0 : moe.gate[0].rows;
    MoeCapture& c = *capture_;
    c.tokens = t;
    c.top_k = k;
    c.num_experts = moe.num_experts();
    c.expert_ff = ff;
    c.route_experts.assign(route_experts_.begin(), route_experts_.begin() + t * k);
    c.expert_down_inputs.resize(static_cast<size_t>(t * k * ff));
    for (int64_t route = 0; route < t * k; ++route) {
      const float* from = expert_gate_.data() + route_slots_[static_cast<size_t>(route)] * ff;
      std::copy(from, from + ff, c.expert_down_inputs.data() + route * ff);
    }
  }

  // gate = x · w_gateᵀ, up = x · w_upᵀ, sharing one quantization of x (in `ws`) when their
  // formats agree. x: [t, w_gate.cols]; gate, up: [t, w_gate.rows]
  void gate_and_up(const WeightMatrix& w_gate, const WeightMatrix& w_up, const float* x, int64_t t,
                   float* gate, float* up, cpu::Workspace& ws) {
    if (same_activation(w_gate, w_up)) {
      const cpu::QuantizedActivations a =
          cpu::quantize_activations(w_gate.dtype, x, t, w_gate.cols, ws, w_gate.input_order);
      cpu::matmul(view(w_gate), a, gate);
      cpu::matmul(view(w_up), a, up);
    } else {
      cpu::matmul(view(w_gate), x, t, gate, ws);
      cpu::matmul(view(w_up), x, t, up, ws);
    }
  }

  const ModelConfig& config_;
  const ModelWeights& weights_;
  cpu::Rope rope_;
  cpu::Rope local_rope_;  // Gemma 3's sliding layers' (used only when rope_local_theta > 0)
  cpu::Workspace ws_;
  bool has_fused_ = false;  // some layer has wqkv_packed or w_gate_up_packed
  int64_t capacity_tokens_ = 0;
  int64_t capacity_rows_ = 0;
  std::vector<ActivationBuffer> activations_;  // indexed by Activation::id
  HostFloats up_;       // [T, intermediate]: the up projection beside the gate
  HostFloats fused_;    // [T, q_dim + 2 kv_dim] or [T, 2 intermediate]
  HostFloats cos_sin_;  // [T, head_dim]: RoPE cos/sin of the step's positions
  // moe_mlp's (cpu_working_memory.h's DecoderBufferSizes says what each holds); a route is a
  // token's j-th choice, token · k + j.
  HostFloats router_, expert_rows_, expert_gate_, expert_up_;
  HostFloats route_weights_;               // [T · k]
  std::vector<int32_t> route_experts_;     // [T · k]: each route's expert
  std::vector<int32_t> expert_routes_;     // [T · k]: the routes grouped by expert
  std::vector<int32_t> route_slots_;       // [T · k]: where each route sits in the grouping
  std::vector<int32_t> expert_first_;      // [n_experts + 1]: each expert's first slot
  std::vector<int32_t> active_experts_;    // the step's chosen experts, ascending
  std::vector<cpu::Workspace> expert_ws_;  // one per team member, for experts side by side
  MoeCapture* capture_ = nullptr;          // capture_moe's: where moe_mlp copies its routes
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const ModelConfig& config, const ModelWeights& weights) {
  return std::make_unique<CpuBackend>(config, weights);
}

}  // namespace tern
