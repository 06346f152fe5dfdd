// WindowRunner: windows side by side in each forward, every one in blocks of its own.
#include "tern/eval/window_runner.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "tern/core/error.h"

namespace tern {
namespace {

constexpr int kBlockSize = 16;

// A window feeds its first ctx - 1 tokens: the logits of the last one are never scored and no
// scored token attends to it, so it would only cost time.
int64_t fed_tokens(int64_t ctx) { return ctx - 1; }

int64_t checked_windows_per_forward(const Decoder& decoder, int64_t ctx, int64_t batch_tokens) {
  if (batch_tokens < 1)
    throw Error("the batch size must be at least 1 token, got " + std::to_string(batch_tokens));
  if (ctx < kMinEvalContext)
    throw Error("a perplexity context of " + std::to_string(ctx) +
                " tokens is too small (at least " + std::to_string(kMinEvalContext) + ")");
  const int64_t model_ctx = decoder.config().max_position_embeddings;
  if (model_ctx > 0 && ctx > model_ctx)
    throw Error("a perplexity context of " + std::to_string(ctx) +
                " tokens exceeds the model's context of " + std::to_string(model_ctx));
  return tern::windows_per_forward(ctx, batch_tokens);
}

}  // namespace

WindowRunner::WindowRunner(Decoder& decoder, int64_t ctx, int64_t batch_tokens, KvDtype kv_dtype)
    : decoder_(decoder),
      ctx_(ctx),
      windows_per_forward_(checked_windows_per_forward(decoder, ctx, batch_tokens)),
      chunk_tokens_(std::min(batch_tokens, fed_tokens(ctx))),
      blocks_per_window_((fed_tokens(ctx) + kBlockSize - 1) / kBlockSize),
      cache_(
          decoder.kv_cache_config(windows_per_forward_ * blocks_per_window_, kBlockSize, kv_dtype)),
      batch_(static_cast<int32_t>(blocks_per_window_), kBlockSize),
      block_tables_(static_cast<size_t>(windows_per_forward_ * blocks_per_window_)),
      inputs_(static_cast<size_t>(windows_per_forward_ * fed_tokens(ctx))) {
  std::iota(block_tables_.begin(), block_tables_.end(), 0);
  const int64_t scored = ctx - 1 - ctx / 2;
  logits_.resize(static_cast<size_t>(windows_per_forward_ * scored * decoder.config().vocab_size));
  decoder_.reserve(windows_per_forward_ * chunk_tokens_, windows_per_forward_ * scored);
}

void WindowRunner::run(const EvalWindows& windows,
                       const std::function<void(int64_t, std::span<float>)>& on_window) {
  if (windows.ctx != ctx_)
    throw Error("windows of " + std::to_string(windows.ctx) +
                " tokens given to a runner made for " + std::to_string(ctx_));
  const int64_t fed = fed_tokens(ctx_);
  const int64_t first = windows.first_scored();
  const int64_t scored = windows.scored_per_window();
  const int64_t vocab = decoder_.config().vocab_size;
  for (int64_t w0 = 0; w0 < windows.num_windows(); w0 += windows_per_forward_) {
    const int64_t n = std::min(windows_per_forward_, windows.num_windows() - w0);
    for (int64_t s = 0; s < n; ++s) {
      std::span<const int32_t> window = windows.window(w0 + s);
      int32_t* in = inputs_.data() + s * fed;
      std::copy(window.begin(), window.begin() + fed, in);
      if (windows.bos >= 0) in[0] = windows.bos;
    }
    // Positions [c, c + chunk) of each window per forward; the cache keeps the earlier chunks.
    // Logit rows come out window by window, chunk after chunk, which is the buffer's layout
    // (chunks happen only with one window per forward).
    int64_t rows_done = 0;
    for (int64_t c = 0; c < fed; c += chunk_tokens_) {
      const int64_t len = std::min(chunk_tokens_, fed - c);
      batch_.clear();
      for (int64_t s = 0; s < n; ++s) {
        const std::span<const int32_t> tokens(inputs_.data() + s * fed + c,
                                              static_cast<size_t>(len));
        const std::span<const int32_t> blocks(block_tables_.data() + s * blocks_per_window_,
                                              static_cast<size_t>(blocks_per_window_));
        batch_.add_sequence_logits_from(tokens, static_cast<int32_t>(c), blocks,
                                        static_cast<size_t>(std::max<int64_t>(0, first - c)));
      }
      const StepContext ctx = batch_.context();
      decoder_.check_step(ctx, cache_);
      decoder_.forward(ctx, cache_, logits_.data() + rows_done * vocab);
      rows_done += ctx.num_logit_rows();
    }
    for (int64_t s = 0; s < n; ++s)
      on_window(w0 + s, std::span<float>(logits_.data() + s * scored * vocab,
                                         static_cast<size_t>(scored * vocab)));
  }
}

}  // namespace tern
