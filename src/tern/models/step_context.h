// What the model sees of one engine step: a flat batch of tokens from any number of sequences
// (decodes, prefill chunks and verifies mixed), where their K/V go and which rows want logits.
// nano-vllm's Context; views only. StepBatch builds one and owns its arrays.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tern/backend/kv_types.h"

namespace tern {

struct StepContext {
  std::span<const int32_t> token_ids;     // [T]
  std::span<const int32_t> positions;     // [T]: position of each token in its sequence
  std::span<const int64_t> slot_mapping;  // [T]: cache slot of each token's K/V (-1: skip)
  // Block tables [S, max_blocks_per_seq], seq_of_token [T], context_lens [T] (position + 1).
  AttentionBatch attention;
  // [R]: indices into the T tokens whose logits forward() computes, in this order.
  std::span<const int32_t> logit_rows;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_logit_rows() const { return static_cast<int64_t>(logit_rows.size()); }
};

// Owns the arrays of a StepContext; clear() keeps their capacity so a loop of steps does not
// allocate once it has seen its largest batch.
class StepBatch {
 public:
  explicit StepBatch(int32_t max_blocks_per_seq, int block_size = 16)
      : max_blocks_per_seq_(max_blocks_per_seq), block_size_(block_size) {}

  void clear();

  // Adds `tokens` of one sequence at positions start_pos, start_pos+1, …; `block_table` lists
  // its cache blocks (at most max_blocks_per_seq, enough for start_pos + tokens.size()).
  // `want_logits`: the last token's row is added to the logit rows (all of them when
  // `all_logits`, as a verify step wants). The caller checks ids and sizes beforehand.
  void add_sequence(std::span<const int32_t> tokens, int32_t start_pos,
                    std::span<const int32_t> block_table, bool want_logits,
                    bool all_logits = false);
  // As add_sequence, with the logits of every token from index `first_logit` of `tokens` on
  // (none when first_logit >= tokens.size()): perplexity scores only a window's second half,
  // and the lm_head rows of the first half would be wasted.
  void add_sequence_logits_from(std::span<const int32_t> tokens, int32_t start_pos,
                                std::span<const int32_t> block_table, size_t first_logit);

  StepContext context() const;
  int32_t max_blocks_per_seq() const { return max_blocks_per_seq_; }

 private:
  int32_t max_blocks_per_seq_;
  int block_size_;
  std::vector<int32_t> token_ids_, positions_, seq_of_token_, context_lens_, logit_rows_;
  std::vector<int64_t> slot_mapping_;
  std::vector<int32_t> block_tables_;  // [num_seqs, max_blocks_per_seq_]
};

}  // namespace tern
