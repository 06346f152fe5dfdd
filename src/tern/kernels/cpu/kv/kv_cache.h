// The paged KV cache: per layer a K and a V tensor of fixed-size token blocks, allocated once.
// Which block belongs to which sequence is the BlockManager's business (engine); the cache
// only stores rows at slots (slot = block_id * block_size + offset in block), vLLM's contract.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tern/blocks/kv_cache_config.h"

namespace tern::cpu {

// What the 64-byte alignment of each layer's arrays (K, V and their scales) adds to a cache of
// `config`'s shape, at most.
uint64_t kv_cache_padding_bytes(const KvCacheConfig& config);

// How many blocks of `config`'s shape (its num_blocks is ignored) fit in `budget_bytes`
// (e.g. --kv-cache-memory).
int64_t kv_cache_blocks_for_budget(const KvCacheConfig& config, uint64_t budget_bytes);

class KvCache {
 public:
  // The largest head_dim the attention kernel takes (it keeps a block of rows on the stack).
  static constexpr int kMaxHeadDim = 512;

  // Allocates and zeroes the whole cache (64-byte aligned; every layer's K, V and scale arrays
  // start on a 64-byte boundary). Throws tern::Error on a bad config or when the memory is not
  // there.
  explicit KvCache(const KvCacheConfig& config);

  KvCache(KvCache&&) noexcept = default;
  KvCache& operator=(KvCache&&) noexcept = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Stores token t's K and V rows at slot_mapping[t], converted to the cache's dtype (the 8-bit
  // ones quantized head by head, quantize_kv_head); a slot of
  // -1 skips the token (vLLM: padding, or a token whose KV is already cached). Other slots must
  // be in [0, num_slots()) — check_slot_mapping says so with an error, this does not check.
  // k, v: [num_tokens, n_kv_heads, head_dim]; slot_mapping: [num_tokens]
  void write(int layer, const float* k, const float* v, std::span<const int64_t> slot_mapping);

  // Throws tern::Error naming the first slot that is neither -1 nor in [0, num_slots()).
  void check_slot_mapping(std::span<const int64_t> slot_mapping) const {
    tern::check_slot_mapping(config_, slot_mapping);
  }

  // Raw tensors of one layer, elements of config().dtype, and for the 8-bit dtypes the f16
  // scale of each token's kv head (nullptr for the others): row element d of kv head h at slot
  // s is data[(s * n_kv_heads + h) * head_dim + d] · scales[s * n_kv_heads + h].
  // k_data, v_data: [num_blocks, block_size, n_kv_heads, head_dim]
  // k_scales, v_scales: [num_blocks, block_size, n_kv_heads]
  void* k_data(int layer) { return region(layer, 0); }
  void* v_data(int layer) { return region(layer, 1); }
  const void* k_data(int layer) const { return region(layer, 0); }
  const void* v_data(int layer) const { return region(layer, 1); }
  uint16_t* k_scales(int layer) { return scales(layer, 2); }
  uint16_t* v_scales(int layer) { return scales(layer, 3); }
  const uint16_t* k_scales(int layer) const { return scales(layer, 2); }
  const uint16_t* v_scales(int layer) const { return scales(layer, 3); }

  // Copies block `src`'s K and V rows, in every layer, over block `dst` (copy on write of a
  // block that sequences share). Both must be in [0, num_blocks).
  void copy_block(int64_t src, int64_t dst);

  // Where block `block` (in [0, num_blocks)) lies: per layer its K codes, V codes and, for the
  // 8-bit dtypes, K scales, V scales, in that order. Each range is contiguous and together
  // they are bytes_per_block(); two caches of one config give the same list of sizes, so a
  // block moves between instances range by range, as it is (disaggregation).
  std::vector<std::span<std::byte>> block_ranges(int64_t block);
  std::vector<std::span<const std::byte>> block_ranges(int64_t block) const;

  // Reads slot `slot` of one layer back as f32 (for tests and debugging tools).
  // k, v: [n_kv_heads, head_dim]
  void read_slot(int layer, int64_t slot, float* k, float* v) const;

  const KvCacheConfig& config() const { return config_; }
  int64_t num_slots() const { return config_.num_slots(); }
  size_t element_bytes() const { return element_bytes_; }
  size_t total_bytes() const { return total_bytes_; }

 private:
  struct FreeDeleter {
    void operator()(std::byte* p) const;
  };

  // A layer is K data, V data, then (8-bit dtypes) K scales, V scales.
  std::byte* region(int layer, int i) const {
    const size_t offset = static_cast<size_t>(i) < 2
                              ? static_cast<size_t>(i) * tensor_bytes_
                              : 2 * tensor_bytes_ + static_cast<size_t>(i - 2) * scales_bytes_;
    return base_.get() + static_cast<size_t>(layer) * layer_bytes_ + offset;
  }
  // K and V codes, and for the 8-bit dtypes their scales.
  int arrays_per_layer() const { return scales_bytes_ == 0 ? 2 : 4; }
  // Array i of `layer` (region's numbering), block `block`'s part of it.
  std::span<std::byte> block_range(int layer, int i, int64_t block) const;
  uint16_t* scales(int layer, int i) const {
    return scales_bytes_ == 0 ? nullptr : reinterpret_cast<uint16_t*>(region(layer, i));
  }

  KvCacheConfig config_;
  size_t element_bytes_ = 0;
  size_t tensor_bytes_ = 0;  // one layer's K (or V), rounded up to 64 bytes
  size_t scales_bytes_ = 0;  // one layer's K (or V) scales, rounded up to 64 bytes; 0 if none
  size_t layer_bytes_ = 0;
  size_t total_bytes_ = 0;
  std::unique_ptr<std::byte[], FreeDeleter> base_;
};

}  // namespace tern::cpu
