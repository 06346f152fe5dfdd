// One sequence through a Decoder: prefill, then decode token by token, with its KV blocks
// allocated simply (blocks 0..n-1 of a cache of its own). What `tern generate`, `tern
// bench-model` and the model tests use until the engine's scheduler runs many sequences.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "tern/kernels/cpu/kv/kv_cache.h"
#include "tern/models/decoder.h"
#include "tern/models/step_context.h"

namespace tern {

class SequenceRunner {
 public:
  // A cache of `kv_dtype` for up to `max_tokens` tokens (prompt and generated). The decoder
  // must outlive the runner. Throws tern::Error when max_tokens < 1.
  SequenceRunner(Decoder& decoder, int64_t max_tokens, int block_size = 16,
                 KvDtype kv_dtype = KvDtype::F16);

  // Runs `tokens` at the next positions in one forward; returns the logits of the last one
  // [vocab] (valid until the next call), or of every token when `all_logits`
  // ([tokens.size(), vocab]). Throws tern::Error when the tokens would not fit or an id is
  // outside the vocabulary.
  std::span<const float> feed(std::span<const int32_t> tokens, bool all_logits = false);
  std::span<const float> feed(int32_t token) { return feed(std::span<const int32_t>(&token, 1)); }

  // Forgets the sequence (positions restart at 0; the cache rows are overwritten).
  void reset() { length_ = 0; }
  // Forgets the tokens from position `length` on (a verify step's rejected ones), keeping the
  // first `length`: the next feed runs at position `length`.
  void rewind(int64_t length) { length_ = std::min(length_, std::max<int64_t>(length, 0)); }
  int64_t length() const { return length_; }
  int64_t max_tokens() const { return max_tokens_; }

 private:
  Decoder& decoder_;
  int64_t max_tokens_;
  cpu::KvCache cache_;
  std::vector<int32_t> block_table_;  // [num_blocks]: 0, 1, …
  StepBatch batch_;
  std::vector<float> logits_;  // [rows, vocab]
  int64_t length_ = 0;
};

}  // namespace tern
