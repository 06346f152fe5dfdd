// Paged attention on the CPU: a step's query tokens split into work items (a run of up to
// kMaxRun consecutive tokens of one sequence × one kv head) shared among the threads, each
// computed by the level's item function (ops/attention_run.h, compiled per level; which level's,
// the dispatch table says). The scalar twin's is compiled here.
#include "tern/kernels/cpu/ops/attention.h"

#include <cstddef>
#include <vector>

#include "tern/kernels/cpu/kernel_table.h"
#include "tern/kernels/cpu/kv/kv_quant.h"
#include "tern/kernels/cpu/ops/attention_item.h"
#include "tern/kernels/cpu/ops/attention_run.h"
#include "tern/kernels/cpu/ops/lanes16.h"
#include "tern/kernels/cpu/stealing_split.h"

namespace tern::cpu {
namespace {

// Splits the step's tokens into runs: consecutive tokens of one sequence, at most kMaxRun.
// Reused across steps (the engine calls attention from one thread), so a step allocates only
// when it has more runs than any before.
const std::vector<AttentionRun>& runs_of(const AttentionBatch& batch) {
  thread_local std::vector<AttentionRun> runs;
  runs.clear();
  for (int64_t t = 0; t < batch.num_tokens(); ++t) {
    if (!runs.empty() && runs.back().count < kMaxRun &&
        batch.seq_of_token[t] == batch.seq_of_token[t - 1]) {
      ++runs.back().count;
    } else {
      runs.push_back(AttentionRun{t, 1});
    }
  }
  return runs;
}

}  // namespace

AttentionKernels scalar_attention_kernels() { return attention_kernels_of<ScalarF32x16>(); }

void paged_attention(const float* q, const KvCache& kv, int layer, const AttentionBatch& batch,
                     int n_heads, float scale, int32_t window, const float* sinks, float* out,
                     Isa isa) {
  const KvCacheConfig& c = kv.config();
  const OpKernels& ops = op_kernels(isa);
  const AttendItemFn attend_item = ops.attention.of(c.dtype);
  const AttentionGeometry g{n_heads,
                            c.n_kv_heads,
                            c.head_dim,
                            n_heads / c.n_kv_heads,
                            c.block_size,
                            kv.element_bytes(),
                            scale,
                            window,
                            sinks,
                            select_kv_dequantize(c.dtype, ops.kv_dequantize_int8,
                                                 ops.kv_dequantize_e4m3, ops.kv_dequantize_e5m2),
                            ops.f16_rows.to_f32};
  const LayerCache cache{static_cast<const std::byte*>(kv.k_data(layer)),
                         static_cast<const std::byte*>(kv.v_data(layer)), kv.k_scales(layer),
                         kv.v_scales(layer)};
  const std::vector<AttentionRun>& runs = runs_of(batch);
  const int64_t items = static_cast<int64_t>(runs.size()) * g.n_kv_heads;
  // Items differ in context length (decodes next to prefills), hence dynamic scheduling; it
  // moves whole items between threads, never splits one, so the bits do not change. The items
  // go last run first: a prefill's last runs see the most keys, and starting the longest items
  // first leaves short ones to even out the threads at the end.
  parallel_for(
      items,
      [&](int64_t i) {
        const int64_t item = items - 1 - i;
        attend_item(q, cache, batch, runs[item / g.n_kv_heads],
                    static_cast<int>(item % g.n_kv_heads), g, out);
      },
      items > 1);
}

void paged_attention(const float* q, const KvCache& cache, int layer, const AttentionBatch& batch,
                     int n_heads, float scale, int32_t window, const float* sinks, float* out) {
  // Dispatched once: the level's item functions and row conversions.
  static const Isa isa = best_isa();
  paged_attention(q, cache, layer, batch, n_heads, scale, window, sinks, out, isa);
}

}  // namespace tern::cpu
