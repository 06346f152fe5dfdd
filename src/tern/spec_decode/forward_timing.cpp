// time_forward: made-up tokens (spread over the vocabulary) in fresh blocks 0, 1, ….
#include "tern/spec_decode/forward_timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "tern/models/step_context.h"

namespace tern {

double time_forward(LanguageModel& decoder, KvCache& cache, int64_t num_tokens, bool all_logits) {
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
