// The paged KV cache as the layers above the backend see it: made by Backend::make_kv_cache
// from a KvCacheConfig, in the backend's own memory, and addressed only by slots and block
// tables (vLLM's contract: slot = block_id * block_size + offset in block). The backend's ops
// read and write its rows; what crosses to the host is whole blocks, explicitly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "tern/backend/kv_types.h"

namespace tern {

// Whole blocks of a cache in host memory. Per block, per layer: its K codes, V codes and, for
// the 8-bit dtypes, K scales, V scales, in that order, together bytes_per_block(). Two caches
// of one config give the same list of sizes, whichever backend made them, so a block moves
// range by range as it is. A cache in host memory hands out its own memory, which a transfer
// reads and writes in place; a device's cache copies through host memory the HostBlocks owns.
class HostBlocks {
 public:
  explicit HostBlocks(std::vector<std::vector<std::span<std::byte>>> ranges)
      : ranges_(std::move(ranges)) {}
  virtual ~HostBlocks() = default;
  HostBlocks(const HostBlocks&) = delete;
  HostBlocks& operator=(const HostBlocks&) = delete;

  // ranges()[i]: the ranges of the i-th block asked for.
  const std::vector<std::vector<std::span<std::byte>>>& ranges() const { return ranges_; }
  // After the host wrote the ranges: the cache takes their bytes (nothing to do in place).
  virtual void write_back() {}

 private:
  std::vector<std::vector<std::span<std::byte>>> ranges_;
};

enum class BlockAccess { Read, Write };

class KvCache {
 public:
  virtual ~KvCache() = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheConfig& config() const { return config_; }
  int64_t num_slots() const { return config_.num_slots(); }

  // Throws tern::Error naming the first slot that is neither -1 nor in [0, num_slots()).
  void check_slot_mapping(std::span<const int64_t> slot_mapping) const {
    tern::check_slot_mapping(config_, slot_mapping);
  }

  // Copies block `src`'s K and V, in every layer, over block `dst` (copy on write of a block
  // that sequences share, n > 1). Both in [0, num_blocks); the engine thread calls it between
  // steps.
  virtual void copy_block(int64_t src, int64_t dst) = 0;

  // `blocks` in host memory, for transfers between instances (disaggregation): Read fills them
  // from the cache now (to send them), Write leaves them for the host to fill and write back
  // (to receive them). The engine thread need not be idle: the blocks are the transfer's alone.
  virtual std::unique_ptr<HostBlocks> host_blocks(std::span<const int32_t> blocks,
                                                  BlockAccess access) = 0;

  // Bytes of memory the cache holds (padding included).
  virtual uint64_t memory_bytes() const = 0;

 protected:
  explicit KvCache(const KvCacheConfig& config) : config_(config) {}

 private:
  KvCacheConfig config_;
};

}  // namespace tern
