// The CPU backend's KV cache: tern::cpu's host-memory cache (kernels/cpu/kv/kv_cache.h), which
// its attention and KV-write kernels read and write directly, behind the neutral KvCache.
#pragma once

#include "tern/backend/kv_cache.h"
#include "tern/kernels/cpu/kv/kv_cache.h"

namespace tern {

class CpuKvCache final : public KvCache {
 public:
  explicit CpuKvCache(const KvCacheConfig& config) : KvCache(config), cache_(config) {}

  void copy_block(int64_t src, int64_t dst) override { cache_.copy_block(src, dst); }
  std::unique_ptr<HostBlocks> host_blocks(std::span<const int32_t> blocks, BlockAccess) override {
    std::vector<std::vector<std::span<std::byte>>> ranges;
    ranges.reserve(blocks.size());
    for (const int32_t b : blocks) ranges.push_back(cache_.block_ranges(b));
    return std::make_unique<HostBlocks>(std::move(ranges));
  }
  uint64_t memory_bytes() const override { return cache_.total_bytes(); }

  cpu::KvCache& host() { return cache_; }
  const cpu::KvCache& host() const { return cache_; }

 private:
  cpu::KvCache cache_;
};

}  // namespace tern
