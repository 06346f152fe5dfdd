// Causal paged attention with grouped-query heads over the KV cache, for a flat batch of query
// tokens from several sequences (decodes, prefill chunks and speculative verifies mixed).
//
// Batch invariance: a query token's output depends only on its q row, its context length and
// the cached K/V of its sequence. Each (token, kv head) is computed start to finish by one
// thread, keys are visited in chunks of kKeyChunk aligned to absolute positions (not to cache
// blocks or to the batch), and every sum runs in a fixed order — so the bits are the same
// alone or in any batch, with any thread count and any block size.
#pragma once

#include <cstdint>
#include <span>

#include "tern/kernels/cpu/kv/kv_cache.h"

namespace tern::cpu {

enum class Isa;  // vec_dot.h

// What the attention kernel reads of a step, built by the ModelRunner (nano-vllm's Context /
// vLLM's attention metadata, reduced to what a CPU kernel needs). Views only; the runner owns
// the arrays and reuses them across steps.
//
// Example: sequence A decodes its token at position 37, sequence B prefills positions 0..2:
//   block_tables   = [[a0, a1, a2, -1],      max_blocks_per_seq = 4 (block_size 16)
//                     [b0, -1, -1, -1]]
//   seq_of_token   = [0, 1, 1, 1]
//   context_lens   = [38, 1, 2, 3]           (position + 1: causal)
// The step's K/V rows must be in the cache (KvCache::write) before attention runs, since a
// prefill token attends to the rows of its own step.
struct AttentionBatch {
  // [num_seqs, max_blocks_per_seq], row-major: each sequence's block ids in order. Entries
  // past the blocks a sequence's tokens need are never read (pad with anything, e.g. -1).
  std::span<const int32_t> block_tables;
  int32_t max_blocks_per_seq = 0;
  // [num_tokens]: the row of block_tables of token t's sequence.
  std::span<const int32_t> seq_of_token;
  // [num_tokens]: the keys token t attends to are positions 0 .. context_lens[t]-1 of its
  // sequence; position[t] + 1 for causal self-attention (a prefix-cached or earlier-chunk part
  // of the sequence counts too: it is in the cache). 0 gives an output of zeros.
  std::span<const int32_t> context_lens;

  int64_t num_tokens() const { return static_cast<int64_t>(seq_of_token.size()); }
};

// Keys per online-softmax chunk: the running max and sum are updated once per chunk.
inline constexpr int kKeyChunk = 16;

// out[t, h] = softmax(q[t, h] · K[lo..ctx)ᵀ · scale) · V[lo..ctx), K/V of kv head
// h / (n_heads / n_kv_heads) of token t's sequence, read from `layer` of the cache through the
// block table; lo = 0 (window 0: causal attention over the whole context), or max(0, ctx −
// window) (sliding-window attention: the last `window` keys, the token's own included). With
// `sinks` (gpt-oss's, one logit per q head, nullptr for none) the softmax's denominator also
// has exp(sinks[h]), a key with no value. The sums are in f32; K/V are converted from the
// cache's dtype.
// q, out: [num_tokens, n_heads, head_dim] (n_kv_heads and head_dim are the cache's)
// Preconditions (check_attention_batch verifies them): n_heads is a multiple of n_kv_heads,
// the arrays have consistent sizes, every block a token reads is in the cache; window ≥ 0.
// Runs the best level's kernels (best_isa(), read once).
void paged_attention(const float* q, const KvCache& cache, int layer, const AttentionBatch& batch,
                     int n_heads, float scale, int32_t window, const float* sinks, float* out);
// The same with level `isa`'s (one this CPU runs): every level gives the same bits.
void paged_attention(const float* q, const KvCache& cache, int layer, const AttentionBatch& batch,
                     int n_heads, float scale, int32_t window, const float* sinks, float* out,
                     Isa isa);

// Throws tern::Error naming the first inconsistency of `batch` against `cache` and `n_heads`
// (sizes, a context longer than its block table, a block id outside the cache, a sequence row
// outside the table). O(total blocks read); meant for the runner when it builds a step and for
// tests — paged_attention itself never checks.
void check_attention_batch(const AttentionBatch& batch, const KvCache& cache, int n_heads);
// The same against a cache's shape alone (what a cache in another backend's memory has).
void check_attention_batch(const AttentionBatch& batch, const KvCacheConfig& c, int n_heads);

}  // namespace tern::cpu
