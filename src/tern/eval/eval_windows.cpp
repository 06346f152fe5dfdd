// EvalWindows: llama-perplexity's cutting of a text into scored windows.
#include "tern/eval/eval_windows.h"

#include <string>

#include "tern/core/error.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

EvalWindows make_eval_windows(std::vector<int32_t> text_tokens, int32_t bos, int64_t ctx,
                              int64_t max_windows) {
  if (ctx < kMinEvalContext)
    throw Error("a perplexity context of " + std::to_string(ctx) +
                " tokens is too small (at least " + std::to_string(kMinEvalContext) + ")");
  const int64_t n = static_cast<int64_t>(text_tokens.size());
  if (n < 2 * ctx)
    throw Error("the text gives only " + std::to_string(n) + " tokens; a context of " +
                std::to_string(ctx) + " needs at least " + std::to_string(2 * ctx) +
                " (two windows, as llama-perplexity requires)");
  int64_t windows = n / ctx;
  if (max_windows > 0 && max_windows < windows) windows = max_windows;
  text_tokens.resize(static_cast<size_t>(windows * ctx));
  EvalWindows w;
  w.ctx = ctx;
  w.bos = bos;
  w.tokens = std::move(text_tokens);
  return w;
}

EvalWindows tokenize_eval_windows(const Tokenizer& tokenizer, std::string_view text, int64_t ctx,
                                  int64_t max_windows) {
  // llama.cpp puts BOS at each window's start exactly when the tokenizer adds it to a text.
  const std::optional<int32_t> bos = tokenizer.bos_id();
  const int32_t window_bos = tokenizer.add_bos() && bos ? *bos : -1;
  // Special-token text ("<|im_end|>" in a document) stays text, as in llama-perplexity.
  return make_eval_windows(tokenizer.encode(text, /*add_special_tokens=*/true,
                                            /*parse_special=*/false),
                           window_bos, ctx, max_windows);
}

}  // namespace tern
