// The backend-neutral names of a step's attention metadata (block tables and context lengths:
// plain host arrays any backend reads). The cache's shape and element type (KvCacheConfig,
// KvDtype) are blocks/'s, the same for every backend; the cache itself is kv_cache.h's, made by
// the backend.
#pragma once

#include "tern/blocks/kv_cache_config.h"
#include "tern/kernels/cpu/ops/attention.h"

namespace tern {

using AttentionBatch = cpu::AttentionBatch;

}  // namespace tern
