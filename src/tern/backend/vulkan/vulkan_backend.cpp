// VulkanBackend: each op is one or a few dispatches with the tensors' device addresses in push
// constants. What the host hands a step (embedding rows, positions' cos/sin, slot mapping,
// block tables) is staged in the context's host memory as the op is recorded; the activations
// are device buffers, grown by reserve() only between steps.
#include "tern/backend/vulkan/vulkan_backend.h"

#include <algorithm>
#include <vector>

#include "tern/backend/rope_config.h"
#include "tern/backend/vulkan/vulkan_kv_cache.h"
#include "tern/backend/vulkan/vulkan_weights.h"
#include "tern/core/error.h"
#include "tern/kernels/cpu/ops/attention.h"

namespace tern {
namespace {

using vulkan::Buffer;
using vulkan::BufferSlice;
using vulkan::Context;
using vulkan::DeviceMatrix;
using vulkan::MatmulIdPush;
using vulkan::MatmulPush;
using vulkan::Memory;
using vulkan::Pipeline;

// The kernels' push constants, laid out as their GLSL blocks (addresses first, 8 bytes each).
struct RmsNormPush {
  VkDeviceAddress x, out, weight, rows;
  uint32_t num_rows, dim;
  float eps;
  uint32_t has_rows;
};
struct AddPush {
  VkDeviceAddress x, y;
  uint32_t n, pad;
};
struct SiluMulPush {
  VkDeviceAddress gate, up, out;
  uint32_t n, pad;
};
struct ClampedSwigluPush {
  VkDeviceAddress gate, up, out;
  uint32_t n;
  float limit;
};
struct MoeRoutePush {
  VkDeviceAddress logits, experts, weights;
  uint32_t t, n, top_k, normalize;
};
struct GatherInputsPush {
  VkDeviceAddress x, y, order;
  uint32_t cols, n;
};
struct MoeGroupPush {
  VkDeviceAddress experts, tiles;
  uint32_t routes, n, pad0, pad1;
};
struct MoeCombinePush {
  VkDeviceAddress out, routed, weights, x, shared_gate;
  uint32_t h, top_k, has_shared, pad;
};
struct RopePush {
  VkDeviceAddress q, k, table;
  uint32_t t, n_heads, n_kv_heads, head_dim, rotary_dim, interleaved;
};
struct WriteKvPush {
  VkDeviceAddress k, v, k_cache, v_cache, slots;
  uint32_t t, row_elems;
};
struct WriteKvInt8Push {
  VkDeviceAddress k, v, k_codes, v_codes, k_scales, v_scales, slots;
  uint32_t t, n_kv_heads, head_dim, pad;
};
struct AttentionPush {
  VkDeviceAddress q, out, k_cache, v_cache, block_tables, seq_of_token, context_lens, k_scales,
      v_scales;
  uint32_t max_blocks, block_size, n_heads, n_kv_heads, head_dim;
  float scale;
  uint32_t window;
  uint32_t has_sinks;
  VkDeviceAddress sinks;
};

constexpr uint32_t kMaxGroups = 65535;  // the least maxComputeWorkGroupCount Vulkan allows
constexpr int64_t kTileWords = 10;      // a tile of moe_group.comp: expert, count, 8 routes

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// Groups of `per_group` invocations over n items, spread over x and y when x alone cannot hold
// them (the kernels index i = global x + global y · 65535 · per_group).
void dispatch_1d(Context& c, const Pipeline& p, const void* push, int64_t n, int64_t per_group) {
  const int64_t groups = (n + per_group - 1) / per_group;
  const int64_t gx = std::min<int64_t>(groups, kMaxGroups);
  c.dispatch(p, push, u32(gx), u32((groups + kMaxGroups - 1) / kMaxGroups));
}

class VulkanBackend final : public Backend {
 public:
  VulkanBackend(const Device& device, Context& context, const ModelConfig& config,
                const ModelWeights& weights)
      : device_(device),
        context_(context),
        config_(config),
        weights_(weights),
        rope_(cpu::Rope(rope_config(config, weights))),
        local_rope_(cpu::Rope(local_rope_config(config, weights))),
        device_weights_(context, weights) {
    if (config.head_dim % 2 != 0 || config.head_dim > 256)
      throw Error("--device vulkan: head_dim " + std::to_string(config.head_dim) +
                  " is not one the Vulkan attention takes (even, at most 256)");
    add_ = &context.pipeline("add", sizeof(AddPush));
    silu_mul_ = &context.pipeline(
        config.mlp_activation == MlpActivation::GeluTanh ? "gelu_tanh_mul" : "silu_mul",
        sizeof(SiluMulPush));
    rms_norm_ = &context.pipeline("rms_norm", sizeof(RmsNormPush));
    rope_kernel_ = &context.pipeline("rope", sizeof(RopePush));
    write_kv_ = &context.pipeline("write_kv", sizeof(WriteKvPush));
    write_kv_int8_ = &context.pipeline("write_kv_int8", sizeof(WriteKvInt8Push));
    attention_ = &context.pipeline("attention", sizeof(AttentionPush));
    attention_int8_ = &context.pipeline("attention_int8", sizeof(AttentionPush));
    if (device_weights_.max_ordered_cols() > 0)
      gather_inputs_ = &context.pipeline("gather_inputs", sizeof(GatherInputsPush));
    if (config.num_experts > 0) {
      silu_mul_experts_ = &context.pipeline("silu_mul", sizeof(SiluMulPush));
      clamped_swiglu_ = &context.pipeline("clamped_swiglu", sizeof(ClampedSwigluPush));
      moe_route_ = &context.pipeline("moe_route", sizeof(MoeRoutePush));
      moe_group_ = &context.pipeline("moe_group", sizeof(MoeGroupPush));
      moe_combine_ = &context.pipeline("moe_combine", sizeof(MoeCombinePush));
    }
  }

  const Device& device() const override { return device_; }

  Activation make_activation(int64_t width, ActivationRows rows) override {
    activations_.push_back({width, rows, Buffer()});
    grow(activations_.back());
    return Activation{static_cast<int32_t>(activations_.size() - 1)};
  }

  void reserve(int64_t t, int64_t r) override {
    if (t <= capacity_tokens_ && r <= capacity_rows_) return;
    // Commands recorded before may still name the buffers this replaces.
    context_.finish();
    capacity_tokens_ = std::max(t, capacity_tokens_);
    capacity_rows_ = std::max(r, capacity_rows_);
    for (ActivationBuffer& a : activations_) grow(a);
    up_ = Buffer(context_, bytes_of(config_.intermediate_size * capacity_tokens_), Memory::Device);
    if (const int64_t cols = device_weights_.max_ordered_cols(); cols > 0)
      gathered_ = Buffer(context_, bytes_of(cols * std::max(capacity_tokens_, capacity_rows_)),
                         Memory::Device);
    if (config_.num_experts > 0) {
      const int64_t t_cap = capacity_tokens_, routes = t_cap * config_.num_experts_per_tok;
      const int64_t ff =
          std::max(config_.moe_intermediate_size, config_.shared_expert_intermediate_size);
      router_ = Buffer(context_, bytes_of(t_cap * config_.num_experts), Memory::Device);
      route_experts_ = Buffer(context_, bytes_of(routes), Memory::Device);
      route_weights_ = Buffer(context_, bytes_of(routes), Memory::Device);
      route_tiles_ = Buffer(context_, bytes_of(1 + kTileWords * max_tiles(routes)), Memory::Device);
      expert_gate_ = Buffer(context_, bytes_of(std::max(routes, t_cap) * ff), Memory::Device);
      expert_up_ = Buffer(context_, bytes_of(std::max(routes, t_cap) * ff), Memory::Device);
      expert_out_ = Buffer(context_, bytes_of(routes * config_.hidden_size), Memory::Device);
    }
    for (RopeTable* r : {&rope_, &local_rope_})
      r->cos_sin.reserve(static_cast<size_t>(capacity_tokens_ * r->rope.rotary_dim()));
  }

  uint64_t working_bytes() const override {
    uint64_t bytes = up_.bytes() + gathered_.bytes() + router_.bytes() + route_experts_.bytes() +
                     route_weights_.bytes() + route_tiles_.bytes() + expert_gate_.bytes() +
                     expert_up_.bytes() + expert_out_.bytes();
    for (const ActivationBuffer& a : activations_) bytes += a.buffer.bytes();
    return bytes;
  }

  std::unique_ptr<KvCache> make_kv_cache(const KvCacheConfig& config) override {
    return std::make_unique<vulkan::VulkanKvCache>(context_, config);
  }

  void check_attention(const AttentionBatch& batch, const KvCache& cache,
                       int n_heads) const override {
    const auto* own = dynamic_cast<const vulkan::VulkanKvCache*>(&cache);
    if (own == nullptr || &own->context() != &context_)
      throw Error("the Vulkan backend was given a KV cache of another backend or device");
    cpu::check_attention_batch(batch, cache.config(), n_heads);
  }

  void embed(std::span<const int32_t> ids, Activation x) override {
    // The table stays on the host (a row per token is all a step reads of it).
    const int64_t h = weights_.token_embedding.cols;
    const uint64_t bytes = bytes_of(h * static_cast<int64_t>(ids.size()));
    std::byte* host = nullptr;
    const BufferSlice rows = context_.host_memory(bytes, &host);
    auto* out = reinterpret_cast<float*>(host);
    for (size_t i = 0; i < ids.size(); ++i)
      weights_.embed(ids[i], out + static_cast<int64_t>(i) * h);
    // Gemma's √hidden, as the CPU backend applies it (one float product a value).
    if (const auto scale = static_cast<float>(config_.embedding_scale); scale != 1.0f)
      for (int64_t i = 0; i < h * static_cast<int64_t>(ids.size()); ++i) out[i] *= scale;
    const Buffer& dst = buffer(x);
    context_.copy(rows, {dst.handle(), 0, dst.address()}, bytes);
  }

  void set_positions(std::span<const int32_t> positions) override {
    for (RopeTable* r : {&rope_, &local_rope_}) {
      if (r == &local_rope_ && config_.rope_local_theta <= 0) continue;
      r->cos_sin.resize(positions.size() * static_cast<size_t>(r->rope.rotary_dim()));
      r->rope.fill_cos_sin(positions, r->cos_sin.data());
      // A new step: what an earlier one staged is not this one's.
      r->staged = {};
    }
    staged_slots_ = {};
    staged_batch_ = {};
  }

  void rms_norm(Activation x, const float* weight, int64_t rows, int64_t dim, float eps,
                Activation out) override {
    RmsNormPush p{
        address(x), address(out), device_weights_.vector(weight), 0, u32(rows), u32(dim), eps, 0};
    norm_rows(p, rows);
  }

  void rms_norm_rows(Activation x, std::span<const int32_t> rows, const float* weight, int64_t dim,
                     float eps, Activation out) override {
    const BufferSlice list = context_.stage(rows.data(), rows.size_bytes());
    const int64_t n = static_cast<int64_t>(rows.size());
    RmsNormPush p{address(x),
                  address(out),
                  device_weights_.vector(weight),
                  list.address,
                  u32(n),
                  u32(dim),
                  eps,
                  1};
    norm_rows(p, n);
  }

  void matmul(const WeightMatrix& w, std::span<const float> bias, Activation x, int64_t t,
              Activation y) override {
    multiply(w, bias, address(x), t, address(y));
  }

  void qkv(const WeightMatrix& wq, const WeightMatrix& wk, const WeightMatrix& wv,
           const WeightMatrix&, std::span<const float> bq, std::span<const float> bk,
           std::span<const float> bv, Activation x, int64_t t, Activation q, Activation k,
           Activation v) override {
    multiply(wq, bq, address(x), t, address(q));
    multiply(wk, bk, address(x), t, address(k));
    multiply(wv, bv, address(x), t, address(v));
  }

  // The activation is the config's (silu_mul_ is SiLU's or Gemma's tanh GELU's kernel).
  void gate_up(const WeightMatrix& w_gate, const WeightMatrix& w_up, const WeightMatrix&,
               std::span<const float> b_gate, std::span<const float> b_up, Activation x, int64_t t,
               Activation out) override {
    multiply(w_gate, b_gate, address(x), t, address(out));
    multiply(w_up, b_up, address(x), t, up_.address());
    const int64_t n = t * config_.intermediate_size;
    SiluMulPush p{address(out), up_.address(), address(out), u32(n), 0};
    dispatch_1d(context_, *silu_mul_, &p, n, 256);
  }

  // The routing stays on the device: the router's logits, each token's top k (moe_route), each
  // route through its expert's gate, up and down (matmul_id_*: a route reads only its expert's
  // rows), and the weighted sum (moe_combine), after the shared expert where there is one.
  void moe_mlp(const MixtureOfExperts& moe, Activation x_rows, int64_t t,
               Activation out_rows) override {
    const int64_t k = moe.top_k, routes = t * k, ff = moe.gate[0].rows;
    const VkDeviceAddress x = address(x_rows), out = address(out_rows);
    if (const std::optional<SharedExpert>& s = moe.shared) {
      multiply(s->gate, {}, x, t, expert_gate_.address());
      multiply(s->up, {}, x, t, expert_up_.address());
      SiluMulPush a{expert_gate_.address(), expert_up_.address(), expert_gate_.address(),
                    u32(t * s->gate.rows), 0};
      dispatch_1d(context_, *silu_mul_experts_, &a, t * s->gate.rows, 256);
      multiply(s->down, {}, expert_gate_.address(), t, out);
    }
    multiply(moe.router, moe.router_bias, x, t, router_.address());
    MoeRoutePush r{router_.address(),
                   route_experts_.address(),
                   route_weights_.address(),
                   u32(t),
                   u32(moe.num_experts()),
                   u32(k),
                   moe.normalize_top_k ? 1u : 0u};
    dispatch_1d(context_, *moe_route_, &r, t, 64);
    MoeGroupPush g{route_experts_.address(),
                   route_tiles_.address(),
                   u32(routes),
                   u32(moe.num_experts()),
                   0,
                   0};
    context_.dispatch(*moe_group_, &g, 1, 1, 1);
    multiply_experts(moe.gate, moe.gate_bias, x, /*x_by_token=*/true, t, k, expert_gate_.address());
    multiply_experts(moe.up, moe.up_bias, x, true, t, k, expert_up_.address());
    if (moe.swiglu_limit > 0) {
      ClampedSwigluPush a{expert_gate_.address(), expert_up_.address(), expert_gate_.address(),
                          u32(routes * ff), moe.swiglu_limit};
      dispatch_1d(context_, *clamped_swiglu_, &a, routes * ff, 256);
    } else {
      SiluMulPush a{expert_gate_.address(), expert_up_.address(), expert_gate_.address(),
                    u32(routes * ff), 0};
      dispatch_1d(context_, *silu_mul_experts_, &a, routes * ff, 256);
    }
    multiply_experts(moe.down, moe.down_bias, expert_gate_.address(), false, t, k,
                     expert_out_.address());
    MoeCombinePush c{out,
                     expert_out_.address(),
                     route_weights_.address(),
                     x,
                     moe.shared ? device_weights_.vector(moe.shared->gate_weight) : 0,
                     u32(config_.hidden_size),
                     u32(k),
                     moe.shared ? 1u : 0u,
                     0};
    context_.dispatch(*moe_combine_, &c, u32(std::min<int64_t>(t, kMaxGroups)),
                      u32((t + kMaxGroups - 1) / kMaxGroups));
  }

  // Gemma 3's sliding layers rotate by their own table (ModelConfig::local_rope).
  void rope(int layer, Activation q, int n_heads, Activation k, int n_kv_heads,
            int64_t t) override {
    RopeTable& r = config_.local_rope(layer) ? local_rope_ : rope_;
    if (!r.staged.current(context_)) {
      r.staged.address = context_.stage(r.cos_sin.data(), r.cos_sin.size() * sizeof(float)).address;
      r.staged.finishes = context_.finishes();
    }
    RopePush p{address(q),
               address(k),
               r.staged.address,
               u32(t),
               u32(n_heads),
               u32(n_kv_heads),
               u32(r.rope.head_dim()),
               u32(r.rope.rotary_dim()),
               r.rope.config().layout == cpu::RopeLayout::Interleaved ? 1u : 0u};
    dispatch_1d(context_, *rope_kernel_, &p, t * (n_heads + n_kv_heads) * (r.rope.rotary_dim() / 2),
                64);
  }

  void write_kv(KvCache& cache, int layer, Activation k, Activation v,
                std::span<const int64_t> slot_mapping) override {
    const auto& c = static_cast<const vulkan::VulkanKvCache&>(cache);
    if (!staged_slots_.current(context_) || staged_slots_.source != slot_mapping.data() ||
        staged_slots_.count != slot_mapping.size()) {
      // The same mapping for every layer of the step: staged once, as 32-bit slots (the cache
      // refuses more slots than that).
      std::byte* host = nullptr;
      staged_slots_.address = context_.host_memory(slot_mapping.size() * 4, &host).address;
      auto* slots = reinterpret_cast<int32_t*>(host);
      for (size_t i = 0; i < slot_mapping.size(); ++i)
        slots[i] = static_cast<int32_t>(slot_mapping[i]);
      staged_slots_.source = slot_mapping.data();
      staged_slots_.count = slot_mapping.size();
      staged_slots_.finishes = context_.finishes();
    }
    const int64_t t = static_cast<int64_t>(slot_mapping.size());
    const KvCacheConfig& kc = cache.config();
    if (kc.dtype == KvDtype::Int8) {
      WriteKvInt8Push p{address(k),
                        address(v),
                        c.k_address(layer),
                        c.v_address(layer),
                        c.k_scales_address(layer),
                        c.v_scales_address(layer),
                        staged_slots_.address,
                        u32(t),
                        u32(kc.n_kv_heads),
                        u32(kc.head_dim),
                        0};
      dispatch_1d(context_, *write_kv_int8_, &p, t * kc.n_kv_heads * 2, 64);
      return;
    }
    WriteKvPush p{address(k),
                  address(v),
                  c.k_address(layer),
                  c.v_address(layer),
                  staged_slots_.address,
                  u32(t),
                  u32(kc.row_elems())};
    dispatch_1d(context_, *write_kv_, &p, t * kc.row_elems() / 2, 64);
  }

  void attention(Activation q, const KvCache& cache, int layer, const AttentionBatch& batch,
                 int n_heads, float scale, int32_t window, std::span<const float> sinks,
                 Activation out) override {
    const auto& c = static_cast<const vulkan::VulkanKvCache&>(cache);
    if (!staged_batch_.current(context_) || staged_batch_.source != batch.seq_of_token.data() ||
        staged_batch_.count != batch.seq_of_token.size()) {
      staged_batch_.tables =
          context_.stage(batch.block_tables.data(), batch.block_tables.size_bytes()).address;
      staged_batch_.seqs =
          context_.stage(batch.seq_of_token.data(), batch.seq_of_token.size_bytes()).address;
      staged_batch_.lens =
          context_.stage(batch.context_lens.data(), batch.context_lens.size_bytes()).address;
      staged_batch_.source = batch.seq_of_token.data();
      staged_batch_.count = batch.seq_of_token.size();
      staged_batch_.finishes = context_.finishes();
    }
    const KvCacheConfig& kc = cache.config();
    const int64_t t = batch.num_tokens();
    AttentionPush p{address(q),
                    address(out),
                    c.k_address(layer),
                    c.v_address(layer),
                    staged_batch_.tables,
                    staged_batch_.seqs,
                    staged_batch_.lens,
                    c.k_scales_address(layer),
                    c.v_scales_address(layer),
                    u32(batch.max_blocks_per_seq),
                    u32(kc.block_size),
                    u32(n_heads),
                    u32(kc.n_kv_heads),
                    u32(kc.head_dim),
                    scale,
                    u32(window),
                    sinks.empty() ? 0u : 1u,
                    device_weights_.vector(sinks)};
    const int64_t gy = std::min<int64_t>(t, kMaxGroups);
    context_.dispatch(kc.dtype == KvDtype::Int8 ? *attention_int8_ : *attention_, &p, u32(n_heads),
                      u32(gy), u32((t + kMaxGroups - 1) / kMaxGroups));
  }

  void add(Activation x, Activation y, int64_t n) override {
    AddPush p{address(x), address(y), u32(n), 0};
    dispatch_1d(context_, *add_, &p, n, 256);
  }

  void logits(const WeightMatrix& lm_head, Activation x, int64_t rows, float* logits) override {
    const auto hold = context_.hold();
    const uint64_t bytes = bytes_of(rows * lm_head.rows);
    std::byte* host = nullptr;
    const BufferSlice out = context_.host_memory(bytes, &host);
    multiply(lm_head, {}, address(x), rows, out.address);
    context_.finish();
    std::copy_n(reinterpret_cast<const float*>(host), rows * lm_head.rows, logits);
  }

  // The routes and the experts' intermediates stay in device buffers that moe_mlp's shaders
  // reuse layer after layer; nothing copies them out yet, so a per-expert importance matrix is
  // refused here rather than collected without its experts.
  void capture_moe(MoeCapture* host) override {
    if (host != nullptr)
      throw Error(
          "the Vulkan backend does not copy out a mixture of experts' routes and expert "
          "activations (what tern imatrix collects per expert); run it on the CPU (--device cpu)");
  }

  void read_rows(Activation a, int64_t rows, int64_t cols, float* host) override {
    const auto hold = context_.hold();
    const uint64_t bytes = bytes_of(rows * cols);
    std::byte* mem = nullptr;
    const BufferSlice out = context_.host_memory(bytes, &mem);
    const Buffer& from = buffer(a);
    context_.copy({from.handle(), 0, from.address()}, out, bytes);
    context_.finish();
    std::copy_n(reinterpret_cast<const float*>(mem), rows * cols, host);
  }

 private:
  struct ActivationBuffer {
    int64_t width = 0;
    ActivationRows per = ActivationRows::PerToken;
    Buffer buffer;
  };
  // What rope, write_kv and attention staged this step, found again by the host array it came
  // from (every layer of a step passes the same arrays) and good until the context's next
  // finish() (read_rows waits mid-step for `tern imatrix`; then it is staged again).
  struct Staged {
    uint64_t finishes = ~uint64_t{0};
    bool current(const Context& c) const { return finishes == c.finishes(); }
  };
  struct StagedCosSin : Staged {
    VkDeviceAddress address = 0;
  };
  // A RoPE and the step's table of it ([T, rotary_dim], made on the host from the positions).
  struct RopeTable {
    explicit RopeTable(cpu::Rope r) : rope(std::move(r)) {}
    cpu::Rope rope;
    std::vector<float> cos_sin;
    StagedCosSin staged;
  };
  struct StagedSlots : Staged {
    const void* source = nullptr;
    size_t count = 0;
    VkDeviceAddress address = 0;
  };
  struct StagedBatch : Staged {
    const void* source = nullptr;
    size_t count = 0;
    VkDeviceAddress tables = 0, seqs = 0, lens = 0;
  };

  static uint64_t bytes_of(int64_t floats) { return static_cast<uint64_t>(floats) * 4; }

  void grow(ActivationBuffer& a) {
    const int64_t rows = a.per == ActivationRows::PerToken ? capacity_tokens_ : capacity_rows_;
    const uint64_t bytes = bytes_of(a.width * std::max<int64_t>(rows, 1));
    if (a.buffer.bytes() < bytes) a.buffer = Buffer(context_, bytes, Memory::Device);
  }
  const Buffer& buffer(Activation a) const {
    return activations_[static_cast<size_t>(a.id)].buffer;
  }
  VkDeviceAddress address(Activation a) const { return buffer(a).address(); }

  void norm_rows(const RmsNormPush& p, int64_t rows) {
    const int64_t gx = std::min<int64_t>(rows, kMaxGroups);
    context_.dispatch(*rms_norm_, &p, u32(gx), u32((rows + kMaxGroups - 1) / kMaxGroups));
  }

  void multiply(const WeightMatrix& w, std::span<const float> bias, VkDeviceAddress x, int64_t t,
                VkDeviceAddress y) {
    const DeviceMatrix& m = device_weights_.matrix(w);
    if (m.input_order != 0) {  // act-order: its inputs gathered in its order first
      const int64_t n = t * m.cols;
      GatherInputsPush g{x, gathered_.address(), m.input_order, u32(m.cols), u32(n)};
      dispatch_1d(context_, *gather_inputs_, &g, n, 256);
      x = gathered_.address();
    }
    MatmulPush p{m.words,  m.scales,    x,           y,      device_weights_.vector(bias),
                 m.tables, u32(m.rows), u32(m.cols), u32(t), bias.empty() ? 0u : 1u};
    // matmul.comp: 4 rows by up to 8 tokens per workgroup.
    const int64_t groups = (m.rows + 3) / 4;
    context_.dispatch(*m.matmul, &p, u32(std::min<int64_t>(groups, kMaxGroups)), u32((t + 7) / 8),
                      u32((groups + kMaxGroups - 1) / kMaxGroups));
  }

  // Each route r (token r / k's choice r % k) of a step through its expert's rows of `parts`:
  // y[r, :] = x[x_by_token ? r / k : r, :] · expert(r)ᵀ (+ its bias), a workgroup row per tile
  // of moe_group's, in slices of tiles that a dispatch's y dimension holds. How many tiles
  // there are is known on the device only, so every tile a step could have is dispatched.
  void multiply_experts(const std::vector<WeightMatrix>& parts, std::span<const float> bias,
                        VkDeviceAddress x, bool x_by_token, int64_t t, int64_t k,
                        VkDeviceAddress y) {
    const vulkan::DeviceMatrix& m = device_weights_.experts(parts);
    const int64_t routes = t * k, tiles = max_tiles(routes), groups = (m.rows + 3) / 4;
    for (int64_t tile0 = 0; tile0 < tiles; tile0 += kMaxGroups) {
      const int64_t n = std::min<int64_t>(kMaxGroups, tiles - tile0);
      MatmulIdPush p{m.words,
                     m.scales,
                     x,
                     y,
                     device_weights_.vector(bias),
                     route_tiles_.address(),
                     m.tables,
                     u32(m.rows),
                     u32(m.cols),
                     u32(routes),
                     bias.empty() ? 0u : 1u,
                     u32(k),
                     x_by_token ? 1u : 0u,
                     u32(tile0),
                     0};
      context_.dispatch(*m.matmul, &p, u32(std::min<int64_t>(groups, kMaxGroups)), u32(n),
                        u32((groups + kMaxGroups - 1) / kMaxGroups));
    }
  }

  // The most tiles of moe_group's a step of `routes` routes can have: each expert chosen makes
  // ceil(its routes / 8) of them.
  int64_t max_tiles(int64_t routes) const {
    return (routes + 7 * std::min<int64_t>(routes, config_.num_experts)) / 8;
  }

  const Device& device_;
  Context& context_;
  const ModelConfig& config_;
  const ModelWeights& weights_;
  RopeTable rope_;
  RopeTable local_rope_;  // Gemma 3's sliding layers' (used only when rope_local_theta > 0)
  vulkan::DeviceWeights device_weights_;
  const Pipeline* add_ = nullptr;
  const Pipeline* silu_mul_ = nullptr;
  const Pipeline* rms_norm_ = nullptr;
  const Pipeline* rope_kernel_ = nullptr;
  const Pipeline* write_kv_ = nullptr;
  const Pipeline* write_kv_int8_ = nullptr;
  const Pipeline* attention_ = nullptr;
  const Pipeline* attention_int8_ = nullptr;
  int64_t capacity_tokens_ = 0;
  int64_t capacity_rows_ = 0;
  std::vector<ActivationBuffer> activations_;  // indexed by Activation::id
  Buffer up_;                                  // [T, intermediate]: the up projection
  Buffer gathered_;  // [T, cols]: an act-order matrix's inputs in its order (gather_inputs)
  const Pipeline* gather_inputs_ = nullptr;
  // A mixture of experts' step: router logits [T, n_experts], each route's expert and weight
  // [T · k], each route's gate/up [T · k, moe_ff] (the shared expert's [T, its ff] first), and
  // each route's expert output [T · k, hidden].
  Buffer router_, route_experts_, route_weights_, expert_gate_, expert_up_, expert_out_;
  Buffer route_tiles_;  // moe_group's tiles: their count, then kTileWords a tile
  const Pipeline* silu_mul_experts_ = nullptr;  // SiLU's kernel whatever the dense MLP's
  const Pipeline* clamped_swiglu_ = nullptr;
  const Pipeline* moe_route_ = nullptr;
  const Pipeline* moe_group_ = nullptr;
  const Pipeline* moe_combine_ = nullptr;
  StagedSlots staged_slots_;
  StagedBatch staged_batch_;
};

}  // namespace

std::unique_ptr<Backend> make_vulkan_backend(const Device& device, vulkan::Context& context,
                                             const ModelConfig& config,
                                             const ModelWeights& weights) {
  return std::make_unique<VulkanBackend>(device, context, config, weights);
}

}  // namespace tern
