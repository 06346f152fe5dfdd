// The cache shape every decoder of the llama family shares: one K and V row per kv head.
#include "tern/models/language_model.h"

namespace tern {

KvCacheConfig LanguageModel::kv_cache_config(int64_t num_blocks, int block_size,
                                             KvDtype dtype) const {
  const ModelConfig& c = config();
  KvCacheConfig kv;
  kv.num_layers = static_cast<int>(c.num_layers);
  kv.num_blocks = num_blocks;
  kv.block_size = block_size;
  kv.n_kv_heads = static_cast<int>(c.num_kv_heads);
  kv.head_dim = static_cast<int>(c.head_dim);
  kv.dtype = dtype;
  return kv;
}

}  // namespace tern
