#include "tern/backend/vulkan/vulkan_kv_cache.h"

#include <limits>
#include <memory>
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

namespace {

// Blocks copied into (Read) or out of (write_back) a host buffer of their own.
class StagedBlocks final : public HostBlocks {
 public:
  StagedBlocks(Context& context, Buffer host, std::vector<std::vector<std::span<std::byte>>> ranges,
               std::vector<Context::Transfer> from_cache)
      : HostBlocks(std::move(ranges)),
        context_(context),
        host_(std::move(host)),
        from_cache_(std::move(from_cache)) {}

  void write_back() override {
    std::vector<Context::Transfer> to_cache;
    to_cache.reserve(from_cache_.size());
    for (const Context::Transfer& t : from_cache_) to_cache.push_back({t.to, t.from, t.bytes});
    context_.copy_now(to_cache);
  }

 private:
  Context& context_;
  Buffer host_;
  std::vector<Context::Transfer> from_cache_;
};

}  // namespace

std::unique_ptr<HostBlocks> VulkanKvCache::host_blocks(std::span<const int32_t> blocks,
                                                       BlockAccess access) {
  const uint64_t n = block_code_bytes(), s = block_scale_bytes();
  const uint64_t per_block = k_.size() * (2 * n + (k_scales_.empty() ? 0 : 2 * s));
  Buffer host;
  if (!blocks.empty()) host = Buffer(*context_, blocks.size() * per_block, Memory::Host);
  std::vector<std::vector<std::span<std::byte>>> ranges;
  std::vector<Context::Transfer> from_cache;
  uint64_t at = 0;
  auto add = [&](std::vector<std::span<std::byte>>& block, const Buffer& b, uint64_t offset,
                 uint64_t bytes) {
    from_cache.push_back({{b.handle(), offset, 0}, {host.handle(), at, 0}, bytes});
    block.emplace_back(host.mapped() + at, bytes);
    at += bytes;
  };
  for (const int32_t id : blocks) {
    if (id < 0 || id >= config().num_blocks)
      throw Error("kv cache: block " + std::to_string(id) + " is not one of its " +
                  std::to_string(config().num_blocks));
    const auto b = static_cast<uint64_t>(id);
    std::vector<std::span<std::byte>>& block = ranges.emplace_back();
    for (size_t l = 0; l < k_.size(); ++l) {
      add(block, k_[l], b * n, n);
      add(block, v_[l], b * n, n);
      if (!k_scales_.empty()) {
        add(block, k_scales_[l], b * s, s);
        add(block, v_scales_[l], b * s, s);
      }
    }
  }
  if (access == BlockAccess::Read) context_->copy_now(from_cache);
  return std::make_unique<StagedBlocks>(*context_, std::move(host), std::move(ranges),
                                        std::move(from_cache));
}

uint64_t VulkanKvCache::memory_bytes() const {
  uint64_t total = 0;
  for (const std::vector<Buffer>* buffers : {&k_, &v_, &k_scales_, &v_scales_})
    for (const Buffer& b : *buffers) total += b.bytes();
  return total;
}

}  // namespace tern::vulkan
