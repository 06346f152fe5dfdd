// Turns a scheduled step into the model's one flat batch (token ids, positions, slot mapping,
// block tables, context lengths, the rows to sample), runs one forward over the paged KV
// cache, and hands back logits only for the rows that are sampled.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tern/kernels/cpu/kv/kv_cache.h"
#include "tern/models/decoder.h"
#include "tern/models/step_context.h"
#include "tern/scheduler/scheduler.h"

namespace tern {

class ModelRunner {
 public:
  // A cache of `num_blocks` blocks of `block_size` tokens of `kv_dtype` in the decoder's shape;
  // sequences of up to `max_model_len` tokens. The decoder must outlive the runner.
  ModelRunner(Decoder& decoder, int64_t num_blocks, int block_size, int64_t max_model_len,
              KvDtype kv_dtype);

  // Copies the step's shared blocks, then runs its chunks in one forward. Returns the logits of
  // the chunks that sample, in chunk order: one row per sampling chunk, 1 + its drafts for a
  // verify ([rows, vocab]), valid until the next call.
  std::span<const float> execute(const SchedulerStep& step);

  const cpu::KvCache& cache() const { return cache_; }
  // The KV transfer of disaggregation reads and writes blocks that no step touches.
  cpu::KvCache& cache() { return cache_; }
  int64_t vocab_size() const { return decoder_.config().vocab_size; }

 private:
  Decoder& decoder_;
  cpu::KvCache cache_;
  StepBatch batch_;
  std::vector<int32_t> verify_tokens_;  // a verify chunk's tokens: the last one, then the drafts
  std::vector<float> logits_;           // [rows, vocab]
};

}  // namespace tern
