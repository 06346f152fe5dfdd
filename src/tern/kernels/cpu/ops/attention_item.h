// A work item of paged attention (a run of query tokens × one kv head) and the functions that
// compute one, one set per ISA level: ops/attention.cpp splits a step into items and shares them
// among the threads; the dispatch table (op_kernels, kernel_table.h) says which level's
// functions run them. Every level's give the same bits as the scalar twin's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tern/blocks/kv_dtype.h"
#include "tern/kernels/cpu/kv/kv_quant.h"
#include "tern/kernels/cpu/ops/attention.h"

namespace tern::cpu {

// q heads handled together against one loaded chunk; larger groups go round again.
inline constexpr int kMaxGroup = 8;
// Query tokens sharing one loaded chunk: each chunk converted once for more of them.
// attention_bench's 512-token prefill (Qwen3-0.6B's heads, 2 threads, three runs each, µs):
// 8 tokens 11.2-11.6k, 16 9.5k, 32 8.1-8.6k, 64 8.4-8.6k.
inline constexpr int kMaxRun = 32;

// A work item's queries: `count` consecutive tokens of the flat batch from `first`, all of one
// sequence.
struct AttentionRun {
  int64_t first;
  int count;
};

// One layer's K and V as the cache holds them; the scales are nullptr but for 8-bit dtypes.
struct LayerCache {
  const std::byte* k;
  const std::byte* v;
  const uint16_t* k_scales;  // [num_slots, n_kv_heads]
  const uint16_t* v_scales;
};

struct AttentionGeometry {
  int n_heads;
  int n_kv_heads;
  int head_dim;
  int group;  // q heads per kv head
  int block_size;
  size_t elem_bytes;
  float scale;
  int32_t window;      // 0: every key of the context; else its last `window`
  const float* sinks;  // [n_heads]: each q head's softmax sink logit, or nullptr
  // The level's row conversions for rows that are not whole blocks of 16 (the 8-bit dtypes'
  // dequantizer; nullptr for the others), from the same table row as the item's function.
  KvDequantizeFn dequantize;
  void (*f16_to_f32_row)(const uint16_t* x, float* out, int64_t n);
};

// Attention of every q head of kv head `kvh` for the run's tokens.
// q, out: [num_tokens, n_heads, head_dim], the whole step's
using AttendItemFn = void (*)(const float* q, const LayerCache& cache, const AttentionBatch& batch,
                              const AttentionRun& run, int kvh, const AttentionGeometry& g,
                              float* out);

// One level's item functions, one per cache dtype (indexed by KvDtype).
inline constexpr int kNumKvDtypes = 6;
struct AttentionKernels {
  AttendItemFn by_dtype[kNumKvDtypes] = {};
  AttendItemFn of(KvDtype dtype) const { return by_dtype[static_cast<int>(dtype)]; }
};

// The levels' (ops/attention_run.h instantiated with each level's F32x16 policy): the scalar
// twin (ops/attention.cpp) and arch/x86/{avx2,avx512}/f32x16.cpp, arch/arm/neon/f32x16.cpp
// (every ARM level).
AttentionKernels scalar_attention_kernels();
AttentionKernels avx2_attention_kernels();
AttentionKernels avx512_attention_kernels();
AttentionKernels neon_attention_kernels();

}  // namespace tern::cpu
