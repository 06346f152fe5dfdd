// What a KV cache's shape costs in bytes.
#include "tern/blocks/kv_cache_config.h"

namespace tern {

int64_t KvCacheConfig::bytes_per_token() const {
  return 2 * static_cast<int64_t>(num_layers) * n_kv_heads *
         kv_bytes_per_token_head(dtype, head_dim);
}

int64_t KvCacheConfig::bytes_per_block() const { return bytes_per_token() * block_size; }

}  // namespace tern
