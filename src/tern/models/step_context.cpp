// StepBatch: the arrays behind a StepContext, filled sequence by sequence.
#include "tern/models/step_context.h"

namespace tern {

void StepBatch::clear() {
  token_ids_.clear();
  positions_.clear();
  seq_of_token_.clear();
  context_lens_.clear();
  logit_rows_.clear();
  slot_mapping_.clear();
  block_tables_.clear();
}

void StepBatch::add_sequence(std::span<const int32_t> tokens, int32_t start_pos,
                             std::span<const int32_t> block_table, bool want_logits,
                             bool all_logits) {
  size_t first_logit = tokens.size();  // no logits
  if (all_logits)
    first_logit = 0;
  else if (want_logits && !tokens.empty())
    first_logit = tokens.size() - 1;
  add_sequence_logits_from(tokens, start_pos, block_table, first_logit);
}

void StepBatch::add_sequence_logits_from(std::span<const int32_t> tokens, int32_t start_pos,
                                         std::span<const int32_t> block_table, size_t first_logit) {
  const int32_t seq = static_cast<int32_t>(block_tables_.size() / max_blocks_per_seq_);
  const size_t row = block_tables_.size();
  block_tables_.resize(row + static_cast<size_t>(max_blocks_per_seq_), -1);
  for (size_t i = 0; i < block_table.size() && i < static_cast<size_t>(max_blocks_per_seq_); ++i)
    block_tables_[row + i] = block_table[i];
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t pos = start_pos + static_cast<int32_t>(i);
    if (i >= first_logit) logit_rows_.push_back(static_cast<int32_t>(token_ids_.size()));
    token_ids_.push_back(tokens[i]);
    positions_.push_back(pos);
    seq_of_token_.push_back(seq);
    context_lens_.push_back(pos + 1);
    const int32_t block = block_table[static_cast<size_t>(pos / block_size_)];
    slot_mapping_.push_back(static_cast<int64_t>(block) * block_size_ + pos % block_size_);
  }
}

StepContext StepBatch::context() const {
  StepContext ctx;
  ctx.token_ids = token_ids_;
  ctx.positions = positions_;
  ctx.slot_mapping = slot_mapping_;
  ctx.attention.block_tables = block_tables_;
  ctx.attention.max_blocks_per_seq = max_blocks_per_seq_;
  ctx.attention.seq_of_token = seq_of_token_;
  ctx.attention.context_lens = context_lens_;
  ctx.logit_rows = logit_rows_;
  return ctx;
}

}  // namespace tern
