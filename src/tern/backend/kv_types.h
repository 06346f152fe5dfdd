// The backend-neutral names of the KV cache's shape and element type and of a step's attention
// metadata (block tables and context lengths: plain host arrays any backend reads). The cache
// itself is kv_cache.h's, made by the backend.
#pragma once

#include "tern/kernels/cpu/kv/kv_cache.h"
#include "tern/kernels/cpu/ops/attention.h"

namespace tern {

using KvCacheConfig = cpu::KvCacheConfig;
using KvDtype = cpu::KvDtype;
using AttentionBatch = cpu::AttentionBatch;

}  // namespace tern
