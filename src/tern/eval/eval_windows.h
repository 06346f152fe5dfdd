// The windows llama-perplexity scores: a text's tokens cut into non-overlapping runs of `ctx`,
// each fed with BOS in place of its first token (when the tokenizer adds one) and scored on its
// second half, so that every scored token has at least ctx/2 tokens of context.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tern {

class Tokenizer;

// Below this a window scores too few tokens to mean anything (ctx/2 - 1 of them).
inline constexpr int64_t kMinEvalContext = 8;

struct EvalWindows {
  int64_t ctx = 0;
  int32_t bos = -1;             // fed as every window's first token; -1: the text's own token
  std::vector<int32_t> tokens;  // [num_windows, ctx]: the text's tokens, as it has them

  int64_t num_windows() const { return ctx > 0 ? static_cast<int64_t>(tokens.size()) / ctx : 0; }
  // Position j of a window, for j in [first_scored, ctx - 1), is scored: the negative
  // log-likelihood of token j + 1 under the logits at j.
  int64_t first_scored() const { return ctx / 2; }
  int64_t scored_per_window() const { return ctx - 1 - ctx / 2; }
  int64_t num_scored() const { return num_windows() * scored_per_window(); }

  std::span<const int32_t> window(int64_t w) const {
    return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(w * ctx),
                                                    static_cast<size_t>(ctx));
  }
  // The token that scored position k (0-based among the scored ones) of window w predicts.
  int32_t target(int64_t w, int64_t k) const {
    return tokens[static_cast<size_t>(w * ctx + first_scored() + k + 1)];
  }
};

// Cuts `text_tokens` into windows of `ctx` (as many whole ones as there are, at most
// `max_windows` when it is > 0; a tail shorter than ctx is left out, as llama.cpp does).
// Throws tern::Error when ctx < kMinEvalContext or when there are fewer than 2 * ctx tokens
// (llama-perplexity's requirement).
EvalWindows make_eval_windows(std::vector<int32_t> text_tokens, int32_t bos, int64_t ctx,
                              int64_t max_windows = -1);

// The windows of a text under a tokenizer: the whole text encoded at once (with BOS if the
// tokenizer adds one; special tokens' text is not parsed), and BOS at every window's start
// when it does.
EvalWindows tokenize_eval_windows(const Tokenizer& tokenizer, std::string_view text, int64_t ctx,
                                  int64_t max_windows = -1);

}  // namespace tern
