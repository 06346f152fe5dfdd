// The backend-neutral names of the paged KV cache and a step's attention metadata. Today they
// are the CPU's types (the engine owns and allocates the cache); a device backend gives them a
// twin and these names keep models/ and the engine reading the same. The cache's shape and
// element type (KvCacheConfig, KvDtype) are blocks/'s already, the same for every backend.
#pragma once

#include "tern/blocks/kv_cache_config.h"
#include "tern/kernels/cpu/kv/kv_cache.h"
#include "tern/kernels/cpu/ops/attention.h"

namespace tern {

using KvCache = cpu::KvCache;
using AttentionBatch = cpu::AttentionBatch;

}  // namespace tern
