// CpuDevice: each answer from the function the CPU backend itself uses, so a plan and what the
// backend allocates cannot drift apart.
#include "tern/backend/cpu/cpu_device.h"

#include "tern/backend/cpu/cpu_backend.h"
#include "tern/backend/cpu/cpu_working_memory.h"
#include "tern/backend/cpu/weight_packing.h"
#include "tern/core/error.h"
#include "tern/kernels/cpu/kv/kv_cache.h"
#include "tern/kernels/cpu/matmul.h"

namespace tern {
namespace {

class CpuDevice final : public Device {
 public:
  std::string_view name() const override { return "cpu"; }

  void prepare_weights(ModelWeights& weights) const override { pack_for_kernels(weights); }

  std::unique_ptr<Backend> make_backend(const ModelConfig& config,
                                        const ModelWeights& weights) const override {
    return make_cpu_backend(config, weights);
  }

  std::optional<DeviceMemory> own_memory() const override { return std::nullopt; }
  std::optional<double> measure_bandwidth() const override { return std::nullopt; }

  uint64_t kv_cache_overhead_bytes(const KvCacheConfig& shape) const override {
    return cpu::kv_cache_padding_bytes(shape);
  }

  uint64_t prepared_copy_bytes(const MatrixShape& m) const override {
    try {
      return cpu::packed_weight_bytes(cpu::WeightView{m.dtype, m.rows, m.cols, nullptr, 0});
    } catch (const Error&) {
      return 0;  // a type without kernels here: nothing is packed (the model would not load)
    }
  }

  WorkingBytes working_bytes(const ModelConfig& c, std::span<const std::vector<MatrixShape>> layers,
                             const MatrixShape& lm_head, int64_t num_tokens,
                             int64_t num_logit_rows) const override {
    std::vector<MatrixShape> all;
    bool fused = false;
    for (const std::vector<MatrixShape>& l : layers) {
      // [q k v o gate up down]: q/k/v and gate/up are the groups pack_for_kernels may fuse.
      fused = fused || packs_back_to_back(std::span(l).subspan(0, 3)) ||
              packs_back_to_back(std::span(l).subspan(4, 2));
      for (const MatrixShape& m : l)
        if (m.rows > 0) all.push_back(m);
    }
    WorkingBytes w;
    w.activations = decoder_buffer_sizes(c, num_tokens, num_logit_rows, fused).bytes();
    w.workspace = static_cast<uint64_t>(decoder_workspace_count(c)) *
                  decoder_workspace_bytes(all, lm_head, num_tokens, num_logit_rows);
    return w;
  }
};

}  // namespace

const Device& cpu_device() {
  static const CpuDevice device;
  return device;
}

}  // namespace tern
