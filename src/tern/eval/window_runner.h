// Evaluation windows through a Decoder at prefill speed: several windows per forward, each a
// sequence of its own in one StepBatch over a paged KV cache, with logits only for the rows a
// window scores.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "tern/eval/eval_windows.h"
#include "tern/kernels/cpu/kv/kv_cache.h"
#include "tern/models/decoder.h"
#include "tern/models/step_context.h"

namespace tern {

// Whole windows of `ctx` tokens a forward of `batch_tokens` takes side by side (at least 1).
inline int64_t windows_per_forward(int64_t ctx, int64_t batch_tokens) {
  return ctx > 0 && batch_tokens > ctx ? batch_tokens / ctx : 1;
}

class WindowRunner {
 public:
  // Each forward takes up to `batch_tokens` tokens: batch_tokens / ctx whole windows, or, when
  // that is under one, one window in chunks of batch_tokens (as llama-perplexity's -b).
  // Throws tern::Error when batch_tokens < 1 or a window is longer than the model's context.
  // The cache holds `kv_dtype` (what --kv-cache-dtype costs in quality is measured this way).
  WindowRunner(Decoder& decoder, int64_t ctx, int64_t batch_tokens,
               KvDtype kv_dtype = KvDtype::F16);

  // Runs the windows in order and calls `on_window(w, logits)` for each, with the logits of its
  // scored positions [scored_per_window, vocab] (writable: callers may turn them into
  // log-probabilities in place; valid until the callback returns).
  void run(const EvalWindows& windows,
           const std::function<void(int64_t window, std::span<float> logits)>& on_window);

  int64_t windows_per_forward() const { return windows_per_forward_; }
  int64_t chunk_tokens() const { return chunk_tokens_; }

 private:
  Decoder& decoder_;
  int64_t ctx_;
  int64_t windows_per_forward_;
  int64_t chunk_tokens_;  // of one window in one forward
  int64_t blocks_per_window_;
  cpu::KvCache cache_;
  StepBatch batch_;
  std::vector<int32_t> block_tables_;  // [windows_per_forward, blocks_per_window]
  std::vector<int32_t> inputs_;        // [windows_per_forward, ctx - 1]: what each window feeds
  std::vector<float> logits_;          // [windows_per_forward, scored_per_window, vocab]
};

}  // namespace tern
