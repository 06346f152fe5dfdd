// SequenceRunner: a StepBatch of one sequence per call.
#include "tern/engine/sequence_runner.h"

#include <numeric>
#include <string>

#include "tern/core/error.h"

namespace tern {
namespace {

int64_t blocks_for(int64_t tokens, int block_size) {
  if (tokens < 1)
    throw Error("a sequence needs room for at least one token, got " + std::to_string(tokens));
  return (tokens + block_size - 1) / block_size;
}

}  // namespace

SequenceRunner::SequenceRunner(Decoder& decoder, int64_t max_tokens, int block_size,
                               KvDtype kv_dtype)
    : decoder_(decoder),
      max_tokens_(max_tokens),
      cache_(decoder.kv_cache_config(blocks_for(max_tokens, block_size), block_size, kv_dtype)),
      block_table_(static_cast<size_t>(blocks_for(max_tokens, block_size))),
      batch_(static_cast<int32_t>(block_table_.size()), block_size) {
  std::iota(block_table_.begin(), block_table_.end(), 0);
}

std::span<const float> SequenceRunner::feed(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw Error("feed: no tokens");
  if (length_ + n > max_tokens_)
    throw Error("sequence of " + std::to_string(length_ + n) + " tokens exceeds the " +
                std::to_string(max_tokens_) + " its KV cache was made for");
  const int64_t vocab = decoder_.config().vocab_size;
  for (int32_t id : tokens)
    if (id < 0 || id >= vocab)
      throw Error("token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                  std::to_string(vocab));
  batch_.clear();
  batch_.add_sequence(tokens, static_cast<int32_t>(length_), block_table_, true, all_logits);
  const StepContext ctx = batch_.context();
  const int64_t rows = ctx.num_logit_rows();
  if (static_cast<int64_t>(logits_.size()) < rows * vocab)
    logits_.resize(static_cast<size_t>(rows * vocab));
  decoder_.forward(ctx, cache_, logits_.data());
  length_ += n;
  return {logits_.data(), static_cast<size_t>(rows * vocab)};
}

}  // namespace tern
