// check_attention_batch: a step's attention metadata checked against the cache before
// paged_attention, which trusts it, reads any of it.
#include <string>

#include "tern/core/error.h"
#include "tern/kernels/cpu/ops/attention.h"

namespace tern::cpu {

void check_attention_batch(const AttentionBatch& batch, const KvCache& cache, int n_heads) {
  check_attention_batch(batch, cache.config(), n_heads);
}

void check_attention_batch(const AttentionBatch& batch, const KvCacheConfig& c, int n_heads) {
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
  const int64_t num_seqs =
      batch.max_blocks_per_seq > 0
          ? static_cast<int64_t>(batch.block_tables.size()) / batch.max_blocks_per_seq
          : 0;
  for (int64_t t = 0; t < batch.num_tokens(); ++t) {
    const std::string where = "attention: token " + std::to_string(t);
    const int32_t seq = batch.seq_of_token[t];
    const int32_t ctx = batch.context_lens[t];
    if (ctx < 0) throw Error(where + " has a negative context length");
    if (ctx == 0) continue;
    if (seq < 0 || seq >= num_seqs) {
      throw Error(where + " belongs to sequence row " + std::to_string(seq) +
                  " but the table has " + std::to_string(num_seqs) + " rows");
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
