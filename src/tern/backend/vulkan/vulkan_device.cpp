#include "tern/backend/vulkan/vulkan_device.h"

#include <charconv>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include "tern/backend/vulkan/vulkan_backend.h"
#include "tern/backend/vulkan/vulkan_context.h"
#include "tern/core/error.h"

namespace tern {
namespace {

class VulkanDevice final : public Device {
 public:
  explicit VulkanDevice(uint32_t index)
      : name_("vulkan:" + std::to_string(index)), context_(vulkan::context(index)) {}

  std::string_view name() const override { return name_; }

  // The backend uploads the weights it multiplies by; nothing is laid out on the host.
  void prepare_weights(ModelWeights&) const override {}

  std::unique_ptr<Backend> make_backend(const ModelConfig& config,
                                        const ModelWeights& weights) const override {
    return make_vulkan_backend(*this, context_, config, weights);
  }

  std::optional<DeviceMemory> own_memory() const override {
    return DeviceMemory{context_.device_heap_bytes(), context_.device_bytes_in_use()};
  }

  std::optional<double> measure_bandwidth() const override {
    return context_.measure_copy_bandwidth();
  }

  uint64_t kv_cache_overhead_bytes(const KvCacheConfig&) const override { return 0; }
  uint64_t prepared_copy_bytes(const MatrixShape&) const override { return 0; }

  WorkingBytes working_bytes(const ModelConfig& c, std::span<const std::vector<MatrixShape>>,
                             const MatrixShape&, int64_t num_tokens,
                             int64_t num_logit_rows) const override {
    // The decoder's activations (x, xn, out; q, attn; k, v; gate) and the backend's up
    // projection per token, its final rows per logit row; the kernels need no scratch.
    const int64_t per_token =
        3 * c.hidden_size + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * c.intermediate_size;
    WorkingBytes w;
    w.activations =
        static_cast<uint64_t>(per_token * num_tokens + c.hidden_size * num_logit_rows) * 4;
    return w;
  }

 private:
  std::string name_;
  vulkan::Context& context_;
};

}  // namespace

const Device* find_vulkan_device(std::string_view name) {
  if (name.substr(0, 6) != "vulkan") return nullptr;
  uint32_t index = 0;
  if (name.size() > 6) {
    const std::string_view n = name.substr(6);
    if (n.size() < 2 || n[0] != ':') return nullptr;
    const auto [end, err] = std::from_chars(n.data() + 1, n.data() + n.size(), index);
    if (err != std::errc() || end != n.data() + n.size())
      throw Error("--device " + std::string(name) + ": give vulkan or vulkan:N");
  }
  static std::mutex mutex;
  static std::map<uint32_t, std::unique_ptr<VulkanDevice>> opened;
  std::lock_guard lock(mutex);
  auto it = opened.find(index);
  if (it == opened.end()) it = opened.emplace(index, std::make_unique<VulkanDevice>(index)).first;
  return it->second.get();
}

std::string describe_vulkan_devices() {
  std::string out;
  const std::vector<vulkan::PhysicalDeviceInfo>* devices = nullptr;
  try {
    devices = &vulkan::physical_devices();
  } catch (const Error& e) {
    return std::string(e.what()) + "\n";  // the instance's errors name Vulkan already
  }
  if (devices->empty()) return "vulkan: the loader sees no device (Debian: mesa-vulkan-drivers)\n";
  for (size_t i = 0; i < devices->size(); ++i) {
    const vulkan::PhysicalDeviceInfo& d = (*devices)[i];
    out += "vulkan:" + std::to_string(i) + "  " + d.name + " (" + d.type + ")\n";
    out += "  driver: " + d.driver + ", Vulkan " + vulkan::api_version_name(d.api_version) + "\n";
    for (size_t h = 0; h < d.heaps.size(); ++h) {
      char gib[32];
      std::snprintf(gib, sizeof gib, "%.2f", static_cast<double>(d.heaps[h].bytes) / (1u << 30));
      out += "  memory heap " + std::to_string(h) + ": " + gib + " GiB" +
             (d.heaps[h].device_local ? ", device-local" : "") + "\n";
    }
    out += "  subgroup size: " + std::to_string(d.subgroup_size) +
           ", shared memory: " + std::to_string(d.max_shared_bytes / 1024) + " KiB" +
           ", storage buffer range: " + std::to_string(d.max_storage_buffer_range >> 20) + " MiB\n";
    auto yes = [](bool b) { return b ? "yes" : "no"; };
    out += std::string("  bufferDeviceAddress: ") + yes(d.buffer_device_address) +
           ", shaderInt64: " + yes(d.shader_int64) + ", shaderFloat16: " + yes(d.shader_float16) +
           ", shaderInt8: " + yes(d.shader_int8) + ", 16-bit storage: " + yes(d.storage_16bit) +
           "\n";
    const std::string missing = d.missing();
    out += missing.empty() ? "  tern runs on it\n"
                           : "  tern cannot run on it: lacks " + missing + "\n";
  }
  return out;
}

}  // namespace tern
