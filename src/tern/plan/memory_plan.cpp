// KV cache and working-memory sizes, from the same answers the engine and the backend use.
#include "tern/plan/memory_plan.h"

namespace tern::plan {

KvCacheConfig kv_shape(const ModelConfig& c, KvDtype dtype, int block_size) {
  KvCacheConfig kv;
  kv.num_layers = static_cast<int>(c.num_layers);
  kv.block_size = block_size;
  kv.n_kv_heads = static_cast<int>(c.num_kv_heads);
  kv.head_dim = static_cast<int>(c.head_dim);
  kv.dtype = dtype;
  return kv;
}

KvPlan plan_kv(const ModelConfig& c, KvDtype dtype, int64_t max_model_len, int64_t max_num_seqs,
               int block_size, const Device& device) {
  const KvCacheConfig shape = kv_shape(c, dtype, block_size);
  KvPlan p;
  p.dtype = dtype;
  p.bytes_per_token = shape.bytes_per_token();
  p.num_blocks = max_num_seqs * ((max_model_len + block_size - 1) / block_size);
  p.bytes = static_cast<uint64_t>(p.num_blocks) * static_cast<uint64_t>(shape.bytes_per_block()) +
            device.kv_cache_overhead_bytes(shape);
  return p;
}

std::vector<KvDtype> listed_kv_dtypes() {
  return {KvDtype::F16, KvDtype::BF16, KvDtype::Fp8E4M3, KvDtype::Fp8E5M2, KvDtype::Int8};
}

WorkingMemory plan_working_memory(const ModelConfig& c, const WeightPlan& weights,
                                  int64_t num_tokens, int64_t logit_rows, const Device& device) {
  WorkingMemory w;
  w.num_tokens = num_tokens;
  w.logit_rows = logit_rows;
  const WorkingBytes held =
      device.working_bytes(c, weights.layer_matrices(), weights.lm_head(), num_tokens, logit_rows);
  w.activations = held.activations;
  w.workspace = held.workspace;
  w.logits =
      static_cast<uint64_t>(logit_rows) * static_cast<uint64_t>(c.vocab_size) * sizeof(float);
  return w;
}

}  // namespace tern::plan
