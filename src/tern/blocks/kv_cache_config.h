// The shape of a paged KV cache and what it costs: what the engine plans with, the models
// size their attention by and disaggregation checks a peer against, whichever backend holds
// the cache (the CPU's is kernels/cpu/kv/kv_cache.h).
#pragma once

#include <cstdint>
#include <span>

#include "tern/blocks/kv_dtype.h"

namespace tern {

struct KvCacheConfig {
  int num_layers = 0;
  int64_t num_blocks = 0;
  int block_size = 16;  // tokens per block
  int n_kv_heads = 0;
  int head_dim = 0;
  // Element type of K and V (--kv-cache-dtype). The 8-bit ones keep a scale per token and kv
  // head beside the rows (kv_dtype.h).
  KvDtype dtype = KvDtype::F16;

  // One token's K and V rows (and scales) in every layer; this is what a context length costs.
  int64_t bytes_per_token() const;
  // One block in every layer (the unit the BlockManager hands out).
  int64_t bytes_per_block() const;
  // Elements of one token's K (or V) row in one layer: n_kv_heads * head_dim.
  int64_t row_elems() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
  // num_blocks × block_size: the slots a step's slot mapping may name.
  int64_t num_slots() const { return num_blocks * block_size; }
};

// Throws tern::Error naming the first slot of `slot_mapping` that is neither -1 (skip) nor in
// [0, config.num_slots()).
void check_slot_mapping(const KvCacheConfig& config, std::span<const int64_t> slot_mapping);

}  // namespace tern
