// `tern plan`'s memory: the KV cache for a context × sequences (as the engine sizes it, in
// blocks), the engine's working memory at a step's token budget (as the Decoder allocates it),
// and their sum with the weights.
#pragma once

#include <cstdint>
#include <vector>

#include "tern/backend/device.h"
#include "tern/blocks/kv_cache_config.h"
#include "tern/formats/model_config.h"
#include "tern/plan/weight_plan.h"

namespace tern::plan {

// The KV cache that holds `max_num_seqs` sequences of `max_model_len` tokens at once.
struct KvPlan {
  KvDtype dtype = KvDtype::F16;
  int64_t bytes_per_token = 0;  // every layer's K and V (and their scales)
  int64_t num_blocks = 0;       // max_num_seqs × ⌈max_model_len / block_size⌉
  uint64_t bytes = 0;           // num_blocks blocks and the cache's alignment padding
};

// The cache's shape for `config` (num_blocks 0).
KvCacheConfig kv_shape(const ModelConfig& config, KvDtype dtype, int block_size);
// On `device` (its cache's alignment padding).
KvPlan plan_kv(const ModelConfig& config, KvDtype dtype, int64_t max_model_len,
               int64_t max_num_seqs, int block_size, const Device& device);

// The KV dtypes a plan lists side by side.
std::vector<KvDtype> listed_kv_dtypes();

// What the engine allocates besides weights and cache for steps of up to `num_tokens` tokens
// and `logit_rows` sampled rows.
struct WorkingMemory {
  int64_t num_tokens = 0;
  int64_t logit_rows = 0;
  uint64_t activations = 0;  // the forward's f32 rows (Device::working_bytes)
  uint64_t workspace = 0;    // the matmuls' scratch: on the CPU their quantized activations
  uint64_t logits = 0;       // ModelRunner's logits [logit_rows, vocab] f32

  uint64_t total() const { return activations + workspace + logits; }
};

// As `device` allocates it (on the CPU: this CPU's kernels, their activation formats and packed
// layouts). Throws tern::Error for a matrix type the device has no kernels for.
WorkingMemory plan_working_memory(const ModelConfig& config, const WeightPlan& weights,
                                  int64_t num_tokens, int64_t logit_rows, const Device& device);

// Everything a run of the plan holds in memory.
struct MemoryTotal {
  uint64_t weights = 0;
  uint64_t repacked = 0;  // WeightPlan::repacked_bytes
  uint64_t kv_cache = 0;
  uint64_t working = 0;

  uint64_t total() const { return weights + repacked + kv_cache + working; }
};

}  // namespace tern::plan
