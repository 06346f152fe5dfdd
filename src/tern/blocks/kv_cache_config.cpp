// What a KV cache's shape costs in bytes, and the slot check every backend's cache shares.
#include "tern/blocks/kv_cache_config.h"

#include <string>

#include "tern/core/error.h"

namespace tern {

int64_t KvCacheConfig::bytes_per_token() const {
  return 2 * static_cast<int64_t>(num_layers) * n_kv_heads *
         kv_bytes_per_token_head(dtype, head_dim);
}

int64_t KvCacheConfig::bytes_per_block() const { return bytes_per_token() * block_size; }

void check_slot_mapping(const KvCacheConfig& config, std::span<const int64_t> slot_mapping) {
  const int64_t slots = config.num_slots();
  for (size_t t = 0; t < slot_mapping.size(); ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot == -1 || (slot >= 0 && slot < slots)) continue;
    throw Error("kv cache: slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot) +
                " is neither -1 nor a slot of the " + std::to_string(slots) + " in the cache");
  }
}

}  // namespace tern
