#include "tern/backend/vulkan/vulkan_kv_cache.h"

#include <limits>
#include <string>

#include "tern/core/error.h"

namespace tern::vulkan {

VulkanKvCache::VulkanKvCache(Context& context, const KvCacheConfig& config)
    : KvCache(config), context_(&context) {
  if (config.num_layers <= 0 || config.num_blocks <= 0 || config.block_size <= 0 ||
      config.n_kv_heads <= 0 || config.head_dim <= 0)
    throw Error("kv cache: every dimension must be positive");
  if (config.dtype != KvDtype::F16)
    throw Error("--device vulkan: --kv-cache-dtype " + std::string(kv_dtype_name(config.dtype)) +
                " is not built for the Vulkan backend yet (it has f16)");
  if (config.head_dim % 2 != 0 || config.head_dim > 256)
    throw Error("--device vulkan: head_dim " + std::to_string(config.head_dim) +
                " is not one the Vulkan attention takes (even, at most 256)");
  if (config.num_slots() * config.row_elems() >= std::numeric_limits<int32_t>::max())
    throw Error("--device vulkan: a KV cache of " + std::to_string(config.num_slots()) +
                " slots is more than the kernels' 32-bit indices reach per layer");
  const uint64_t bytes = static_cast<uint64_t>(config.num_slots() * config.row_elems()) * 2;
  for (int l = 0; l < config.num_layers; ++l) {
    k_.emplace_back(context, bytes, Memory::Device);
    v_.emplace_back(context, bytes, Memory::Device);
  }
  // Zeroed, as the CPU's: a block read before it is written holds zeros, not old memory.
  for (int l = 0; l < config.num_layers; ++l) {
    context.zero(k_[static_cast<size_t>(l)]);
    context.zero(v_[static_cast<size_t>(l)]);
  }
  context.finish();
}

uint64_t VulkanKvCache::block_bytes() const {
  return static_cast<uint64_t>(config().block_size * config().row_elems()) * 2;
}

void VulkanKvCache::copy_block(int64_t src, int64_t dst) {
  const uint64_t n = block_bytes();
  for (size_t l = 0; l < k_.size(); ++l)
    for (const Buffer* b : {&k_[l], &v_[l]})
      context_->copy({b->handle(), static_cast<uint64_t>(src) * n, 0},
                     {b->handle(), static_cast<uint64_t>(dst) * n, 0}, n);
}

std::vector<std::span<std::byte>> VulkanKvCache::host_block_ranges(int64_t block) {
  if (k_.empty() || k_.front().mapped() == nullptr)
    throw Error("vulkan: " + context_->info().name +
                "'s KV cache is not in host-visible memory; moving its blocks to another "
                "instance is not built for such devices yet");
  context_->finish();  // the blocks as the recorded steps leave them
  const uint64_t n = block_bytes();
  std::vector<std::span<std::byte>> out;
  for (size_t l = 0; l < k_.size(); ++l)
    for (const Buffer* b : {&k_[l], &v_[l]})
      out.emplace_back(b->mapped() + static_cast<uint64_t>(block) * n, n);
  return out;
}

uint64_t VulkanKvCache::memory_bytes() const {
  uint64_t total = 0;
  for (size_t l = 0; l < k_.size(); ++l) total += k_[l].bytes() + v_[l].bytes();
  return total;
}

}  // namespace tern::vulkan
