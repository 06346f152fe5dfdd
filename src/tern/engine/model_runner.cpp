// ModelRunner: one StepBatch per step, filled chunk by chunk.
#include "tern/engine/model_runner.h"

namespace tern {

ModelRunner::ModelRunner(Decoder& decoder, int64_t num_blocks, int block_size,
                         int64_t max_model_len)
    : decoder_(decoder),
      cache_(decoder.kv_cache_config(num_blocks, block_size)),
      batch_(static_cast<int32_t>((max_model_len + block_size - 1) / block_size), block_size) {}

std::span<const float> ModelRunner::execute(const SchedulerStep& step) {
  for (const BlockCopy& copy : step.copies) cache_.copy_block(copy.src, copy.dst);
  batch_.clear();
  for (const ScheduledChunk& chunk : step.chunks) {
    const Sequence& seq = *chunk.seq;
    const auto tokens = std::span<const int32_t>(seq.token_ids)
                            .subspan(static_cast<size_t>(seq.num_computed_tokens),
                                     static_cast<size_t>(chunk.num_tokens));
    batch_.add_sequence(tokens, static_cast<int32_t>(seq.num_computed_tokens), seq.block_table,
                        chunk.sample);
  }
  const StepContext ctx = batch_.context();
  const int64_t vocab = vocab_size();
  const size_t size = static_cast<size_t>(ctx.num_logit_rows() * vocab);
  if (logits_.size() < size) logits_.resize(size);
  decoder_.forward(ctx, cache_, logits_.data());
  return {logits_.data(), size};
}

}  // namespace tern
