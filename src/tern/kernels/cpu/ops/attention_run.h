// Paged attention's work item, the online softmax over a run's chunks of keys, written once over
// an F32x16 policy L (ops/lanes16.h) and compiled by each level with its own (ops/attention.cpp
// the scalar twin, arch/*/f32x16.cpp the others, through attention_kernels_of). One work item is a
// run of up to kMaxRun consecutive query tokens of one sequence (a prefill chunk; a decode is a run
// of one) × one kv head: each chunk of kKeyChunk K/V rows is converted from the cache's dtype once
// and used by every query of the run and every q head of the group. Memory per item is one chunk of
// K and V rows on the stack, whatever the context length.
//
// Batch invariance: every (query token, q head) — a chain below — does exactly the same
// arithmetic on its keys lo..ctx-1 (lo 0, or the start of its sliding window) in chunks aligned
// to absolute positions, whichever run it is in, whoever else shares the chunk and however many
// keys that loaded: lanes outside its own keys are masked to -inf before they are used. How a
// chunk's rows are read: ops/kv_rows.h. Internal linkage, so each level's copy keeps its own flags.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tern/core/half.h"
#include "tern/kernels/cpu/kv/kv_quant.h"
#include "tern/kernels/cpu/ops/attention_item.h"
#include "tern/kernels/cpu/ops/kv_rows.h"
#include "tern/kernels/cpu/ops/lanes16.h"
#include "tern/kernels/cpu/ops/row_ops.h"

namespace tern::cpu {
namespace {

static_assert(kKeyChunk == 16, "a chunk's scores are one F32x16");

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Scores of one query head against the 16 keys of a chunk: the products of element d go (fused)
// into lane d % 16 of key j's accumulator, d in order, and each key's lanes are summed in a fixed
// tree (sum_lanes_of_16). Keys past the chunk's are masked by the caller: their lanes may
// hold anything. In the last block, the elements past hd must be zero (KBlocks' pad; rows
// read in place are only read when hd is whole blocks).
// q: [hd]
template <class L, class KRows>
inline F32x16 chunk_scores(const float* q, const KRows& k, int hd) {
  F32x16 acc[kKeyChunk] = {};
  const int full = hd / 16;
  for (int b = 0; b < full; ++b) {
    const F32x16 qd = load16(q + b * 16);
    for (int j = 0; j < kKeyChunk; ++j) acc[j] = L::fma16(qd, k.load(j, b * 16), acc[j]);
  }
  if (full * 16 < hd) {
    // The tail of q against the zero pad: 0 · 0 adds nothing to the lanes past it.
    float tail[16] = {};
    std::copy(q + full * 16, q + hd, tail);
    const F32x16 qd = load16(tail);
    for (int j = 0; j < kKeyChunk; ++j) acc[j] = L::fma16(qd, k.load(j, full * 16), acc[j]);
  }
  return sum_lanes_of_16(acc);
}

// o = o * alpha + sum_j p[j] * v[j], each element summed in key order by fused multiply-adds. Eight
// vectors of o at a time stay in registers across the keys (the same sums as one at a time, with 8
// chains in flight instead of 1). o: [hd]; v: n rows
template <class L, class VRows>
inline void scale_add_rows(float* o, float alpha, const float* p, const VRows& v, int n, int hd) {
  constexpr int kWide = 8;
  int d0 = 0;
  for (; d0 + kWide * 16 <= hd; d0 += kWide * 16) {
    F32x16 acc[kWide];
    for (int k = 0; k < kWide; ++k) acc[k] = load16(o + d0 + k * 16) * alpha;
    for (int j = 0; j < n; ++j) {
      const F32x16 pj = splat16(p[j]);
      for (int k = 0; k < kWide; ++k) acc[k] = L::fma16(pj, v.load(j, d0 + k * 16), acc[k]);
    }
    for (int k = 0; k < kWide; ++k) store16(o + d0 + k * 16, acc[k]);
  }
  for (; d0 + 16 <= hd; d0 += 16) {
    F32x16 acc = load16(o + d0) * alpha;
    for (int j = 0; j < n; ++j) acc = L::fma16(splat16(p[j]), v.load(j, d0), acc);
    store16(o + d0, acc);
  }
  for (int d = d0; d < hd; ++d) {
    float acc = o[d] * alpha;
    for (int j = 0; j < n; ++j) acc = std::fma(p[j], v.at(j, d), acc);
    o[d] = acc;
  }
}

// One kv head's row of the cache as f32; the 8-bit dtypes' without the row's scale, as
// codes16 gives them.
template <KvDtype D>
inline void load_row(const void* src, float* dst, const AttentionGeometry& g) {
  const int n = g.head_dim;
  if constexpr (D == KvDtype::F16) {
    g.f16_to_f32_row(static_cast<const uint16_t*>(src), dst, n);
  } else if constexpr (D == KvDtype::BF16) {
    bf16_to_f32_row(static_cast<const uint16_t*>(src), dst, n);
  } else if constexpr (D == KvDtype::F32) {
    const float* s = static_cast<const float*>(src);
    std::copy(s, s + n, dst);
  } else {
    g.dequantize(static_cast<const uint8_t*>(src), kCodeScale<D>, dst, n);
  }
}

// Online-softmax state of one (query token, q head): the running max, and the running sum
// kept per lane (lane j holds keys ≡ j mod 16), summed in a fixed tree at the end.
struct Chain {
  float max;
  F32x16 sum;
};

// A chunk's per-key scales of the 8-bit dtypes' rows (kept out of the rows' sums: one multiply
// per key instead of one per element).
struct KeyScales {
  alignas(64) float k[kKeyChunk];
  alignas(64) float v[kKeyChunk];
};

// Advances a chain by keys c0 + first .. c0 + n - 1 of a chunk (first < n ≤ 16; the rows outside
// may hold other keys, or anything): scores, online softmax, o = o·alpha + p·V. `scales`: the
// keys' K and V row scales (8-bit dtypes), or nullptr.
// q, o: [hd]
template <class L, class KRows, class VRows>
inline void attend_chunk(const float* q, float* o, Chain& chain, const KRows& k, const VRows& v,
                         int first, int n, const AttentionGeometry& g, const KeyScales* scales) {
  F32x16 s = chunk_scores<L>(q, k, g.head_dim);
  if (scales != nullptr) s = s * load16(scales->k);
  s = s * g.scale;
  const I32x16 lane = lane_index16();
  s = lane < n ? s : splat16(kMinusInf);
  if (first > 0) s = lane < first ? splat16(kMinusInf) : s;
  const float new_max = std::max(chain.max, max_lane(s));
  if (new_max == kMinusInf) return;  // all -inf so far
  // exp(-inf) = 0 on the first chunk: the zeroed output and sum stay zero. exp16<L>(0) is
  // exactly 1, so skipping it when the max holds (most later chunks) changes no bits.
  const float alpha = new_max == chain.max ? 1.0f : exp16<L>(splat16(chain.max - new_max))[0];
  const F32x16 p = exp16<L>(s - new_max);
  chain.max = new_max;
  chain.sum = L::fma16(chain.sum, splat16(alpha), p);
  alignas(64) float p_keys[kKeyChunk];
  store16(p_keys, scales != nullptr ? p * load16(scales->v) : p);
  scale_add_rows<L>(o, alpha, p_keys, v, n, g.head_dim);
}

// Attention of q heads h0 .. h0+nh-1 (all on kv head kvh) of a run's tokens.
// q, out: [num_tokens, n_heads, head_dim], the whole step's
template <class L, KvDtype D>
void attend_run(const float* q, const LayerCache& cache, const AttentionBatch& batch,
                const AttentionRun& run, int kvh, int h0, int nh, const AttentionGeometry& g,
                float* out) {
  const int hd = g.head_dim;
  const int stride = (hd + 15) / 16 * 16;
  const int64_t token_elems = static_cast<int64_t>(g.n_heads) * hd;
  auto head_offset = [&](int i, int h) {
    return (run.first + i) * token_elems + static_cast<int64_t>(h0 + h) * hd;
  };

  Chain chains[kMaxRun][kMaxGroup];
  int ctx[kMaxRun], lo[kMaxRun];  // token i sees keys lo[i] .. ctx[i] - 1
  int max_ctx = 0, min_lo = std::numeric_limits<int>::max();
  for (int i = 0; i < run.count; ++i) {
    ctx[i] = batch.context_lens[run.first + i];
    lo[i] = g.window > 0 ? std::max(0, ctx[i] - g.window) : 0;
    max_ctx = std::max(max_ctx, ctx[i]);
    if (ctx[i] > 0) min_lo = std::min(min_lo, lo[i]);
    for (int h = 0; h < nh; ++h) {
      chains[i][h] = Chain{kMinusInf, F32x16{}};
      std::fill_n(out + head_offset(i, h), hd, 0.0f);
    }
  }
  if (max_ctx == 0) return;

  alignas(64) float k_blocks[kKeyChunk * KvCache::kMaxHeadDim];  // see kBlockFloats
  alignas(64) float v_rows[kKeyChunk * KvCache::kMaxHeadDim];    // [kKeyChunk, stride]
  alignas(64) float k_row[KvCache::kMaxHeadDim];                 // [stride]
  // chunk_scores reads the pad past hd of every key's last block.
  if (stride > hd) {
    std::fill_n(k_blocks, kKeyChunk * stride, 0.0f);
    std::fill_n(k_row, stride, 0.0f);
  }

  const int32_t* block_table =
      batch.block_tables.data() +
      static_cast<int64_t>(batch.seq_of_token[run.first]) * batch.max_blocks_per_seq;
  const size_t row_bytes = static_cast<size_t>(g.n_kv_heads) * hd * g.elem_bytes;
  const size_t head_bytes = static_cast<size_t>(kvh) * hd * g.elem_bytes;
  const size_t head_row_bytes = static_cast<size_t>(hd) * g.elem_bytes;
  auto slot_of = [&](int pos) {
    return static_cast<int64_t>(block_table[pos / g.block_size]) * g.block_size +
           pos % g.block_size;
  };
  auto offset_of = [&](int pos) {
    return static_cast<size_t>(slot_of(pos)) * row_bytes + head_bytes;
  };
  auto scale_at = [&](int pos) { return slot_of(pos) * g.n_kv_heads + kvh; };
  // A chunk is read where it lies when its keys are rows of one cache block, a stride apart,
  // and whole blocks of 16 elements: no copy, widened in registers as each (query, head) reads
  // them. That pays where few share the chunk (a decode: 1.46× faster at context 2048); a
  // prefill run's 16 or more re-widen it so often that converting it once is faster
  // (attention_bench's prefill 4% slower in place). Both give the same bits.
  constexpr bool kScaled = D == KvDtype::Int8 || D == KvDtype::Fp8E4M3 || D == KvDtype::Fp8E5M2;
  constexpr int kMaxReadersInPlace = 4;
  const bool in_place =
      run.count * nh <= kMaxReadersInPlace && g.block_size % kKeyChunk == 0 && hd % 16 == 0;
  const int64_t row_elems = static_cast<int64_t>(g.n_kv_heads) * hd;
  KeyScales key_scales{};
  const KeyScales* scales = kScaled ? &key_scales : nullptr;
  // A chain visits exactly the chunks (aligned to absolute positions) that hold its keys,
  // whichever run it is in.
  auto attend_all = [&](int c0, const auto& k, const auto& v) {
    for (int i = 0; i < run.count; ++i) {
      if (ctx[i] <= c0 || c0 + kKeyChunk <= lo[i]) continue;
      const int n = std::min(kKeyChunk, ctx[i] - c0);
      const int first = std::max(0, lo[i] - c0);
      for (int h = 0; h < nh; ++h) {
        const int64_t offset = head_offset(i, h);
        attend_chunk<L>(q + offset, out + offset, chains[i][h], k, v, first, n, g, scales);
      }
    }
  };
  for (int c0 = min_lo / kKeyChunk * kKeyChunk; c0 < max_ctx; c0 += kKeyChunk) {
    const int n_loaded = std::min(kKeyChunk, max_ctx - c0);
    // The rows of a kv head are n_kv_heads rows apart and the blocks scattered, which the
    // hardware prefetcher follows poorly: ask for the next chunk while this one computes.
    for (int pos = c0 + kKeyChunk; pos < std::min(c0 + 2 * kKeyChunk, max_ctx); ++pos) {
      const size_t offset = offset_of(pos);
      for (size_t b = 0; b < head_row_bytes; b += 64) {
        __builtin_prefetch(cache.k + offset + b);
        __builtin_prefetch(cache.v + offset + b);
      }
    }
    if (in_place) {
      // Keys c0 .. c0 + 15 share a block (c0 and the block size are multiples of 16); those
      // past the context are read but masked, and so are never used.
      const size_t offset = offset_of(c0);
      if constexpr (kScaled) {
        for (int j = 0; j < kKeyChunk; ++j) {  // past the context: anything, masked
          const int64_t at = scale_at(c0) + int64_t{j} * g.n_kv_heads;
          key_scales.k[j] = f16_to_f32(cache.k_scales[at]) / kCodeScale<D>;
          key_scales.v[j] = f16_to_f32(cache.v_scales[at]) / kCodeScale<D>;
        }
      }
      attend_all(c0, cache_rows<L, D>(cache.k + offset, row_elems),
                 cache_rows<L, D>(cache.v + offset, row_elems));
      continue;
    }
    for (int j = 0; j < n_loaded; ++j) {
      const size_t offset = offset_of(c0 + j);
      if constexpr (kScaled) {
        const int64_t at = scale_at(c0 + j);
        key_scales.k[j] = f16_to_f32(cache.k_scales[at]) / kCodeScale<D>;
        key_scales.v[j] = f16_to_f32(cache.v_scales[at]) / kCodeScale<D>;
      }
      if (hd % 16 == 0) {
        // Widened 16 at a time in registers and stored where they go (row by row through
        // load_row, a call per row, the calls were 13% of a one-thread prefill's attention).
        const auto k_src = cache_rows<L, D>(cache.k + offset, 0);
        const auto v_src = cache_rows<L, D>(cache.v + offset, 0);
        for (int b = 0; b < hd / 16; ++b) {
          store16(k_blocks + b * kBlockFloats + j * 16, k_src.load(0, b * 16));
          store16(v_rows + j * stride + b * 16, v_src.load(0, b * 16));
        }
        continue;
      }
      load_row<D>(cache.k + offset, k_row, g);
      for (int b = 0; b < stride / 16; ++b) {
        store16(k_blocks + b * kBlockFloats + j * 16, load16(k_row + b * 16));
      }
      load_row<D>(cache.v + offset, v_rows + j * stride, g);
    }
    // Only the last chunk is short; its missing keys are scored (and masked), so zero them.
    for (int j = n_loaded; j < kKeyChunk; ++j) {
      for (int b = 0; b < stride / 16; ++b) store16(k_blocks + b * kBlockFloats + j * 16, F32x16{});
    }
    attend_all(c0, KBlocks{k_blocks}, F32Rows{v_rows, stride});
  }
  for (int i = 0; i < run.count; ++i) {
    if (ctx[i] == 0) continue;
    for (int h = 0; h < nh; ++h) {
      float* oh = out + head_offset(i, h);
      const Chain& chain = chains[i][h];
      float inv_sum = 1.0f / sum_lanes_scalar(chain.sum);
      if (g.sinks != nullptr) {
        // The sink joins the softmax as one more logit with no value: the sums move to the
        // larger max, and its exponential adds to the denominator alone.
        const float sink = g.sinks[h0 + h];
        const float max = std::max(chain.max, sink);
        const float alpha = exp16<L>(splat16(chain.max - max))[0];
        const float sink_p = exp16<L>(splat16(sink - max))[0];
        inv_sum = alpha / (sum_lanes_scalar(chain.sum) * alpha + sink_p);
      }
      for (int d = 0; d < hd; ++d) oh[d] *= inv_sum;
    }
  }
}

// A work item: every q head of kv head kvh, kMaxGroup at a time.
template <class L, KvDtype D>
void attend_item(const float* q, const LayerCache& cache, const AttentionBatch& batch,
                 const AttentionRun& run, int kvh, const AttentionGeometry& g, float* out) {
  for (int h0 = kvh * g.group; h0 < (kvh + 1) * g.group; h0 += kMaxGroup) {
    const int nh = std::min(kMaxGroup, (kvh + 1) * g.group - h0);
    attend_run<L, D>(q, cache, batch, run, kvh, h0, nh, g, out);
  }
}

// The level's item functions, by KvDtype.
template <class L>
AttentionKernels attention_kernels_of() {
  static_assert(static_cast<int>(KvDtype::Int8) == kNumKvDtypes - 1);
  AttentionKernels k;
  k.by_dtype[static_cast<int>(KvDtype::F16)] = attend_item<L, KvDtype::F16>;
  k.by_dtype[static_cast<int>(KvDtype::BF16)] = attend_item<L, KvDtype::BF16>;
  k.by_dtype[static_cast<int>(KvDtype::F32)] = attend_item<L, KvDtype::F32>;
  k.by_dtype[static_cast<int>(KvDtype::Fp8E4M3)] = attend_item<L, KvDtype::Fp8E4M3>;
  k.by_dtype[static_cast<int>(KvDtype::Fp8E5M2)] = attend_item<L, KvDtype::Fp8E5M2>;
  k.by_dtype[static_cast<int>(KvDtype::Int8)] = attend_item<L, KvDtype::Int8>;
  return k;
}

}  // namespace
}  // namespace tern::cpu
