// Paged attention on the CPU: one work item per (query token, kv head) computes the outputs of
// all the q heads sharing that kv head, so each K/V row is loaded and converted once per item.
// Memory per item is one chunk of K and V rows on the stack, whatever the context length.
#include "tern/kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "tern/core/error.h"
#include "tern/kernels/cpu/ops.h"

namespace tern::cpu {
namespace {

// q heads handled together against one loaded chunk; larger groups go round again.
constexpr int kMaxGroup = 8;

// 16 floats as one value. GCC's auto-vectoriser keeps to 256-bit registers under
// -march=native on this CPU and splits the 16-lane loops below oddly; a vector type makes the
// lanes explicit (one zmm with AVX-512, several narrower registers elsewhere). Its arithmetic
// is lane-wise, so it computes exactly what the scalar lane loops beside it compute.
using V16 = float __attribute__((vector_size(64)));

inline V16 load16(const float* p) {
  V16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store16(float* p, V16 v) { std::memcpy(p, &v, sizeof v); }

// The 16 lanes summed in a fixed tree.
inline float sum_lanes(float* lane) {
  for (int width = 8; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
  }
  return lane[0];
}

// q · k with element i added into lane i % 16 and the lanes summed in a fixed tree: the vector
// form (head_dim a multiple of 16, all models tern knows) and the scalar one give the same
// bits.
inline float dot(const float* a, const float* b, int n) {
  float lane[16];
  if (n % 16 == 0) {
    V16 acc = {};
    for (int i = 0; i < n; i += 16) acc += load16(a + i) * load16(b + i);
    std::memcpy(lane, &acc, sizeof lane);
    return sum_lanes(lane);
  }
  std::fill(lane, lane + 16, 0.0f);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; ++l) lane[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) lane[l] += a[i] * b[i];
  return sum_lanes(lane);
}

// o = o * alpha + sum_j p[j] * v[j], each element summed in key order.
// o: [hd]; v: [n, hd]
inline void scale_add_rows(float* o, float alpha, const float* p, const float* v, int n,
                           int hd) {
  int d0 = 0;
  for (; d0 + 16 <= hd; d0 += 16) {
    V16 acc = load16(o + d0) * alpha;
    for (int j = 0; j < n; ++j) acc += p[j] * load16(v + j * hd + d0);
    store16(o + d0, acc);
  }
  for (int d = d0; d < hd; ++d) {
    float acc = o[d] * alpha;
    for (int j = 0; j < n; ++j) acc += p[j] * v[j * hd + d];
    o[d] = acc;
  }
}

template <DType D>
inline void load_row(const void* src, float* dst, int n) {
  if constexpr (D == DType::F16) {
    f16_to_f32_row(static_cast<const uint16_t*>(src), dst, n);
  } else if constexpr (D == DType::BF16) {
    bf16_to_f32_row(static_cast<const uint16_t*>(src), dst, n);
  } else {
    const float* s = static_cast<const float*>(src);
    std::copy(s, s + n, dst);
  }
}

struct Geometry {
  int n_heads;
  int n_kv_heads;
  int head_dim;
  int group;  // q heads per kv head
  int block_size;
  size_t elem_bytes;
  float scale;
};

// Attention of nh consecutive q heads of one token (q, out point at the first), all on kv
// head kvh.
template <DType D>
void attend(const float* q, const std::byte* k_cache, const std::byte* v_cache,
            const int32_t* block_table, int ctx, int kvh, int nh, const Geometry& g,
            float* out) {
  const int hd = g.head_dim;
  const size_t row_bytes = static_cast<size_t>(g.n_kv_heads) * hd * g.elem_bytes;
  const size_t head_bytes = static_cast<size_t>(kvh) * hd * g.elem_bytes;

  float k_rows[kKeyChunk * KvCache::kMaxHeadDim];  // [kKeyChunk, head_dim]
  float v_rows[kKeyChunk * KvCache::kMaxHeadDim];  // [kKeyChunk, head_dim]
  float max[kMaxGroup];
  float sum[kMaxGroup];
  for (int i = 0; i < nh; ++i) {
    max[i] = -std::numeric_limits<float>::infinity();
    sum[i] = 0.0f;
    std::fill(out + static_cast<int64_t>(i) * hd, out + static_cast<int64_t>(i + 1) * hd, 0.0f);
  }

  auto offset_of = [&](int pos) {
    const int64_t slot = static_cast<int64_t>(block_table[pos / g.block_size]) * g.block_size +
                         pos % g.block_size;
    return static_cast<size_t>(slot) * row_bytes + head_bytes;
  };
  const size_t head_row_bytes = static_cast<size_t>(hd) * g.elem_bytes;
  for (int c0 = 0; c0 < ctx; c0 += kKeyChunk) {
    const int n = std::min(kKeyChunk, ctx - c0);
    // The rows of a kv head are n_kv_heads rows apart and the blocks scattered, which the
    // hardware prefetcher follows poorly: ask for the next chunk while this one computes.
    for (int pos = c0 + kKeyChunk; pos < std::min(c0 + 2 * kKeyChunk, ctx); ++pos) {
      const size_t offset = offset_of(pos);
      for (size_t b = 0; b < head_row_bytes; b += 64) {
        __builtin_prefetch(k_cache + offset + b);
        __builtin_prefetch(v_cache + offset + b);
      }
    }
    for (int j = 0; j < n; ++j) {
      const size_t offset = offset_of(c0 + j);
      load_row<D>(k_cache + offset, k_rows + j * hd, hd);
      load_row<D>(v_cache + offset, v_rows + j * hd, hd);
    }
    for (int i = 0; i < nh; ++i) {
      const float* qh = q + static_cast<int64_t>(i) * hd;
      float* oh = out + static_cast<int64_t>(i) * hd;
      float p[kKeyChunk];
      float chunk_max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < n; ++j) {
        p[j] = dot(qh, k_rows + j * hd, hd) * g.scale;
        chunk_max = std::max(chunk_max, p[j]);
      }
      const float new_max = std::max(max[i], chunk_max);
      if (new_max == -std::numeric_limits<float>::infinity()) continue;  // all -inf so far
      // exp(-inf) = 0 on the first chunk: the zeroed output and sum stay zero.
      const float alpha = std::exp(max[i] - new_max);
      max[i] = new_max;
      float s = sum[i] * alpha;
      for (int j = 0; j < n; ++j) {
        p[j] = std::exp(p[j] - new_max);
        s += p[j];
      }
      sum[i] = s;
      scale_add_rows(oh, alpha, p, v_rows, n, hd);
    }
  }
  if (ctx == 0) return;
  for (int i = 0; i < nh; ++i) {
    float* oh = out + static_cast<int64_t>(i) * hd;
    const float inv_sum = 1.0f / sum[i];
    for (int d = 0; d < hd; ++d) oh[d] *= inv_sum;
  }
}

template <DType D>
void paged_attention_typed(const float* q, const KvCache& cache, int layer,
                           const AttentionBatch& batch, const Geometry& g, float* out) {
  const auto* k_cache = static_cast<const std::byte*>(cache.k_data(layer));
  const auto* v_cache = static_cast<const std::byte*>(cache.v_data(layer));
  const int64_t num_tokens = batch.num_tokens();
  const int64_t items = num_tokens * g.n_kv_heads;
  const int64_t token_elems = static_cast<int64_t>(g.n_heads) * g.head_dim;
  // Items differ in context length (decodes next to prefills), hence dynamic scheduling; it
  // moves whole items between threads, never splits one, so the bits do not change.
#pragma omp parallel for schedule(dynamic, 1) if (items > 1)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t t = item / g.n_kv_heads;
    const int kvh = static_cast<int>(item % g.n_kv_heads);
    const int32_t* table =
        batch.block_tables.data() +
        static_cast<int64_t>(batch.seq_of_token[t]) * batch.max_blocks_per_seq;
    const int ctx = batch.context_lens[t];
    for (int h0 = kvh * g.group; h0 < (kvh + 1) * g.group; h0 += kMaxGroup) {
      const int nh = std::min(kMaxGroup, (kvh + 1) * g.group - h0);
      const int64_t offset = t * token_elems + static_cast<int64_t>(h0) * g.head_dim;
      attend<D>(q + offset, k_cache, v_cache, table, ctx, kvh, nh, g, out + offset);
    }
  }
}

}  // namespace

void paged_attention(const float* q, const KvCache& cache, int layer, const AttentionBatch& batch,
                     int n_heads, float scale, float* out) {
  const KvCacheConfig& c = cache.config();
  const Geometry g{n_heads,       c.n_kv_heads, c.head_dim,           n_heads / c.n_kv_heads,
                   c.block_size,  cache.element_bytes(), scale};
  switch (c.dtype) {
    case DType::F16:
      paged_attention_typed<DType::F16>(q, cache, layer, batch, g, out);
      break;
    case DType::BF16:
      paged_attention_typed<DType::BF16>(q, cache, layer, batch, g, out);
      break;
    default:
      paged_attention_typed<DType::F32>(q, cache, layer, batch, g, out);
      break;
  }
}

void check_attention_batch(const AttentionBatch& batch, const KvCache& cache, int n_heads) {
  const KvCacheConfig& c = cache.config();
  if (n_heads <= 0 || n_heads % c.n_kv_heads != 0) {
    throw Error("attention: " + std::to_string(n_heads) + " q heads is not a multiple of the " +
                std::to_string(c.n_kv_heads) + " kv heads");
  }
  if (batch.context_lens.size() != batch.seq_of_token.size()) {
    throw Error("attention: " + std::to_string(batch.seq_of_token.size()) +
                " tokens in seq_of_token but " + std::to_string(batch.context_lens.size()) +
                " context lengths");
  }
  if (batch.max_blocks_per_seq < 0 ||
      (batch.max_blocks_per_seq == 0 && !batch.block_tables.empty()) ||
      (batch.max_blocks_per_seq > 0 && batch.block_tables.size() % batch.max_blocks_per_seq != 0)) {
    throw Error("attention: block_tables holds " + std::to_string(batch.block_tables.size()) +
                " entries, not a whole number of rows of " +
                std::to_string(batch.max_blocks_per_seq));
  }
  const int64_t num_seqs = batch.max_blocks_per_seq > 0
                               ? static_cast<int64_t>(batch.block_tables.size()) /
                                     batch.max_blocks_per_seq
                               : 0;
  for (int64_t t = 0; t < batch.num_tokens(); ++t) {
    const std::string where = "attention: token " + std::to_string(t);
    const int32_t seq = batch.seq_of_token[t];
    const int32_t ctx = batch.context_lens[t];
    if (ctx < 0) throw Error(where + " has a negative context length");
    if (ctx == 0) continue;
    if (seq < 0 || seq >= num_seqs) {
      throw Error(where + " belongs to sequence row " + std::to_string(seq) + " but the table has " +
                  std::to_string(num_seqs) + " rows");
    }
    const int64_t blocks = (static_cast<int64_t>(ctx) + c.block_size - 1) / c.block_size;
    if (blocks > batch.max_blocks_per_seq) {
      throw Error(where + " sees " + std::to_string(ctx) + " keys, more than " +
                  std::to_string(batch.max_blocks_per_seq) + " blocks of " +
                  std::to_string(c.block_size) + " hold");
    }
    const int32_t* table = batch.block_tables.data() + seq * batch.max_blocks_per_seq;
    for (int64_t b = 0; b < blocks; ++b) {
      if (table[b] < 0 || table[b] >= c.num_blocks) {
        throw Error(where + " reads block " + std::to_string(table[b]) + " (entry " +
                    std::to_string(b) + " of sequence row " + std::to_string(seq) +
                    "), outside the cache's " + std::to_string(c.num_blocks) + " blocks");
      }
    }
  }
}

}  // namespace tern::cpu
