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
  const bool int8 = config.dtype == KvDtype::Int8;
  if (config.dtype != KvDtype::F16 && !int8)
    throw Error("--device vulkan: --kv-cache-dtype " + std::string(kv_dtype_name(config.dtype)) +
                " is not built for the Vulkan backend (it has f16 and int8)");
  if (config.head_dim % (int8 ? 4 : 2) != 0 || config.head_dim > 256)
    throw Error("--device vulkan: head_dim " + std::to_string(config.head_dim) +
                " is not one the Vulkan attention takes (at most 256, a multiple of " +
                (int8 ? "4 with int8)" : "2)"));
  if (config.num_slots() * config.row_elems() >= std::numeric_limits<int32_t>::max())
    throw Error("--device vulkan: a KV cache of " + std::to_string(config.num_slots()) +
                " slots is more than the kernels' 32-bit indices reach per layer");
  const uint64_t codes = static_cast<uint64_t>(config.num_slots() * config.row_elems()) *
                         kv_element_bytes(config.dtype);
  const uint64_t scales =
      (static_cast<uint64_t>(config.num_slots() * config.n_kv_heads) * 2 + 3) / 4 * 4;
  for (int l = 0; l < config.num_layers; ++l) {
    k_.emplace_back(context, codes, Memory::Device);
    v_.emplace_back(context, codes, Memory::Device);
    if (int8) {
      k_scales_.emplace_back(context, scales, Memory::Device);
      v_scales_.emplace_back(context, scales, Memory::Device);
    }
  }
  // Zeroed, as the CPU's: a block read before it is written holds zeros, not old memory.
  for (std::vector<Buffer>* buffers : {&k_, &v_, &k_scales_, &v_scales_})
    for (const Buffer& b : *buffers) context.zero(b);
  context.finish();
}

uint64_t VulkanKvCache::block_code_bytes() const {
  return static_cast<uint64_t>(config().block_size * config().row_elems()) *
         kv_element_bytes(config().dtype);
}

uint64_t VulkanKvCache::block_scale_bytes() const {
  return static_cast<uint64_t>(config().block_size * config().n_kv_heads) * 2;
}

VkDeviceAddress VulkanKvCache::k_scales_address(int layer) const {
  return k_scales_.empty() ? 0 : k_scales_[static_cast<size_t>(layer)].address();
}

VkDeviceAddress VulkanKvCache::v_scales_address(int layer) const {
  return v_scales_.empty() ? 0 : v_scales_[static_cast<size_t>(layer)].address();
}

void VulkanKvCache::copy_block(int64_t src, int64_t dst) {
  const uint64_t n = block_code_bytes(), s = block_scale_bytes();
  const auto from = static_cast<uint64_t>(src), to = static_cast<uint64_t>(dst);
  for (size_t l = 0; l < k_.size(); ++l) {
    for (const Buffer* b : {&k_[l], &v_[l]})
      context_->copy({b->handle(), from * n, 0}, {b->handle(), to * n, 0}, n);
    if (!k_scales_.empty())
      for (const Buffer* b : {&k_scales_[l], &v_scales_[l]})
        context_->copy({b->handle(), from * s, 0}, {b->handle(), to * s, 0}, s);
  }
}

std::vector<std::span<std::byte>> VulkanKvCache::host_block_ranges(int64_t block) {
  if (k_.empty() || k_.front().mapped() == nullptr)
    throw Error("vulkan: " + context_->info().name +
                "'s KV cache is not in host-visible memory; moving its blocks to another "
                "instance is not built for such devices yet");
  context_->finish();  // the blocks as the recorded steps leave them
  const uint64_t n = block_code_bytes(), s = block_scale_bytes();
  const auto b = static_cast<uint64_t>(block);
  std::vector<std::span<std::byte>> out;
  for (size_t l = 0; l < k_.size(); ++l) {
    out.emplace_back(k_[l].mapped() + b * n, n);
    out.emplace_back(v_[l].mapped() + b * n, n);
    if (!k_scales_.empty()) {
      out.emplace_back(k_scales_[l].mapped() + b * s, s);
      out.emplace_back(v_scales_[l].mapped() + b * s, s);
    }
  }
  return out;
}

uint64_t VulkanKvCache::memory_bytes() const {
  uint64_t total = 0;
  for (const std::vector<Buffer>* buffers : {&k_, &v_, &k_scales_, &v_scales_})
    for (const Buffer& b : *buffers) total += b.bytes();
  return total;
}

}  // namespace tern::vulkan
