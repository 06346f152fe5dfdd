// The paged KV cache: per layer a K and a V tensor of fixed-size token blocks, allocated once.
// Which block belongs to which sequence is the BlockManager's business (engine); the cache
// only stores rows at slots (slot = block_id * block_size + offset in block), vLLM's contract.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "tern/core/dtype.h"

namespace tern::cpu {

struct KvCacheConfig {
  int num_layers = 0;
  int64_t num_blocks = 0;
  int block_size = 16;  // tokens per block
  int n_kv_heads = 0;
  int head_dim = 0;
  // Element type of K and V: F16 (default), BF16 or F32. Quantized caches (int8/fp8 with
  // scales) would add their scale arrays next to the data; nothing else here assumes 16 bits.
  DType dtype = DType::F16;

  // One token's K and V rows in every layer; this is what a context length costs.
  int64_t bytes_per_token() const;
  // One block in every layer (the unit the BlockManager hands out).
  int64_t bytes_per_block() const;
  // Elements of one token's K (or V) row in one layer: n_kv_heads * head_dim.
  int64_t row_elems() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
};

// How many blocks of `config`'s shape (its num_blocks is ignored) fit in `budget_bytes`
// (e.g. --kv-cache-memory).
int64_t kv_cache_blocks_for_budget(const KvCacheConfig& config, uint64_t budget_bytes);

// Bytes per element of a dtype the cache can hold; throws tern::Error for others.
size_t kv_cache_element_bytes(DType dtype);

class KvCache {
 public:
  // The largest head_dim the attention kernel takes (it keeps a block of rows on the stack).
  static constexpr int kMaxHeadDim = 512;

  // Allocates and zeroes the whole cache (64-byte aligned; every layer's K and V start on a
  // 64-byte boundary). Throws tern::Error on a bad config or when the memory is not there.
  explicit KvCache(const KvCacheConfig& config);

  KvCache(KvCache&&) noexcept = default;
  KvCache& operator=(KvCache&&) noexcept = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Stores token t's K and V rows at slot_mapping[t], converted to the cache's dtype; a slot of
  // -1 skips the token (vLLM: padding, or a token whose KV is already cached). Other slots must
  // be in [0, num_slots()) — check_slot_mapping says so with an error, this does not check.
  // k, v: [num_tokens, n_kv_heads, head_dim]; slot_mapping: [num_tokens]
  void write(int layer, const float* k, const float* v, std::span<const int64_t> slot_mapping);

  // Throws tern::Error naming the first slot that is neither -1 nor in [0, num_slots()).
  void check_slot_mapping(std::span<const int64_t> slot_mapping) const;

  // Raw tensors of one layer, elements of config().dtype.
  // k_data, v_data: [num_blocks, block_size, n_kv_heads, head_dim]
  void* k_data(int layer) { return base_.get() + layer_offset(layer); }
  void* v_data(int layer) { return base_.get() + layer_offset(layer) + tensor_bytes_; }
  const void* k_data(int layer) const { return base_.get() + layer_offset(layer); }
  const void* v_data(int layer) const {
    return base_.get() + layer_offset(layer) + tensor_bytes_;
  }

  // Copies block `src`'s K and V rows, in every layer, over block `dst` (copy on write of a
  // block that sequences share). Both must be in [0, num_blocks).
  void copy_block(int64_t src, int64_t dst);

  // Reads slot `slot` of one layer back as f32 (for tests and debugging tools).
  // k, v: [n_kv_heads, head_dim]
  void read_slot(int layer, int64_t slot, float* k, float* v) const;

  const KvCacheConfig& config() const { return config_; }
  int64_t num_slots() const { return config_.num_blocks * config_.block_size; }
  size_t element_bytes() const { return element_bytes_; }
  size_t total_bytes() const { return total_bytes_; }

 private:
  struct FreeDeleter {
    void operator()(std::byte* p) const;
  };

  size_t layer_offset(int layer) const { return static_cast<size_t>(layer) * 2 * tensor_bytes_; }

  KvCacheConfig config_;
  size_t element_bytes_ = 0;
  size_t tensor_bytes_ = 0;  // one layer's K (or V), rounded up to 64 bytes
  size_t total_bytes_ = 0;
  std::unique_ptr<std::byte[], FreeDeleter> base_;
};

}  // namespace tern::cpu
