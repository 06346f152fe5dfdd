// ModelRunner: one StepBatch per step, filled chunk by chunk.
#include "tern/engine/model_runner.h"

#include <algorithm>
#include <chrono>

namespace tern {

ModelRunner::ModelRunner(Decoder& decoder, int64_t num_blocks, int block_size,
                         int64_t max_model_len, cpu::KvDtype kv_dtype)
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

double time_forward(Decoder& decoder, cpu::KvCache& cache, int64_t num_tokens, bool all_logits) {
  const int block_size = cache.config().block_size;
  const int64_t vocab = decoder.config().vocab_size;
  num_tokens = std::min(num_tokens, cache.num_slots());
  std::vector<int32_t> tokens(static_cast<size_t>(num_tokens));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((i * 7919 + 13) % static_cast<size_t>(vocab));
  std::vector<int32_t> blocks(static_cast<size_t>((num_tokens + block_size - 1) / block_size));
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = static_cast<int32_t>(b);
  StepBatch batch(static_cast<int32_t>(blocks.size()), block_size);
  batch.add_sequence(tokens, 0, blocks, true, all_logits);
  const StepContext ctx = batch.context();
  std::vector<float> logits(static_cast<size_t>(ctx.num_logit_rows() * vocab));
  const auto start = std::chrono::steady_clock::now();
  decoder.forward(ctx, cache, logits.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tern
