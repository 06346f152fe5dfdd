// The paged KV cache in a Vulkan device's memory: per layer a K and a V buffer of
// [num_slots, n_kv_heads · head_dim] f16 or int8 codes, and for int8 a K and a V buffer of
// [num_slots, n_kv_heads] f16 scales: the CPU cache's layout, so a block's bytes are the same on
// both and move between them as they are. Block copies (n > 1) are commands on the
// device's stream, in order with the steps around them; blocks moving to or from another
// instance are copied through host memory.
#pragma once

#include <vector>

#include "tern/backend/kv_cache.h"
#include "tern/backend/vulkan/vulkan_context.h"

namespace tern::vulkan {

class VulkanKvCache final : public KvCache {
 public:
  // Throws tern::Error for a dtype the Vulkan kernels lack (f16 and int8 they have), a head_dim
  // they do not take, or memory the device does not have.
  VulkanKvCache(Context& context, const KvCacheConfig& config);

  Context& context() const { return *context_; }
  VkDeviceAddress k_address(int layer) const { return k_[static_cast<size_t>(layer)].address(); }
  VkDeviceAddress v_address(int layer) const { return v_[static_cast<size_t>(layer)].address(); }
  // The int8 cache's scales; 0 for f16.
  VkDeviceAddress k_scales_address(int layer) const;
  VkDeviceAddress v_scales_address(int layer) const;

  void copy_block(int64_t src, int64_t dst) override;
  // Copies of the blocks in host memory of their own, moved by copy commands outside the step's
  // stream (Context::copy_now) — also where the device's memory is mapped (lavapipe, resizable
  // BAR): the host reads device memory through a BAR slowly and uncached, and one path is
  // one path to test.
  std::unique_ptr<HostBlocks> host_blocks(std::span<const int32_t> blocks,
                                          BlockAccess access) override;
  uint64_t memory_bytes() const override;

 private:
  // One block's part of a codes (or a scales) buffer.
  uint64_t block_code_bytes() const;
  uint64_t block_scale_bytes() const;
  Context* context_;
  std::vector<Buffer> k_, v_;                // [num_layers]
  std::vector<Buffer> k_scales_, v_scales_;  // [num_layers], int8 only
};

}  // namespace tern::vulkan
