// ModelRunner: one StepBatch per step, filled chunk by chunk.
#include "tern/engine/model_runner.h"

namespace tern {

ModelRunner::ModelRunner(Decoder& decoder, int64_t num_blocks, int block_size,
                         int64_t max_model_len, KvDtype kv_dtype)
    : decoder_(decoder),
      cache_(decoder.kv_cache_config(num_blocks, block_size, kv_dtype)),
      batch_(static_cast<int32_t>((max_model_len + block_size - 1) / block_size), block_size) {}

std::span<const float> ModelRunner::execute(const SchedulerStep& step) {
  for (const BlockCopy& copy : step.copies) cache_.copy_block(copy.src, copy.dst);
  batch_.clear();
  for (const ScheduledChunk& chunk : step.chunks) {
    const Sequence& seq = *chunk.seq;
    const auto tokens =
        std::span<const int32_t>(seq.token_ids)
            .subspan(static_cast<size_t>(seq.num_computed_tokens),
                     static_cast<size_t>(chunk.num_tokens - chunk.num_draft_tokens));
    const int32_t start = static_cast<int32_t>(seq.num_computed_tokens);
    if (chunk.num_draft_tokens == 0) {
      batch_.add_sequence(tokens, start, seq.block_table, chunk.sample);
      continue;
    }
    verify_tokens_.assign(tokens.begin(), tokens.end());
    verify_tokens_.insert(verify_tokens_.end(), seq.draft_token_ids.begin(),
                          seq.draft_token_ids.begin() + chunk.num_draft_tokens);
    batch_.add_sequence(verify_tokens_, start, seq.block_table, true, /*all_logits=*/true);
  }
  const StepContext ctx = batch_.context();
  const int64_t vocab = vocab_size();
  const size_t size = static_cast<size_t>(ctx.num_logit_rows() * vocab);
  if (logits_.size() < size) logits_.resize(size);
  decoder_.forward(ctx, cache_, logits_.data());
  return {logits_.data(), size};
}

}  // namespace tern
