// llama-perplexity's perplexity: windows of a text through the model, several per forward,
// each scored on its second half; PPL = exp(mean NLL) with the standard error of that mean
// carried through the exponential.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tern/eval/eval_windows.h"
#include "tern/models/language_model.h"

namespace tern {

class KldBaseWriter;

struct PerplexityResult {
  double ppl = 0.0;          // exp(mean NLL)
  double uncertainty = 0.0;  // ppl · sqrt((E[nll²] − E[nll]²) / (count − 1)); 0 if that is not > 0
  double mean_nll = 0.0;
  int64_t count = 0;  // scored tokens
  int64_t num_windows = 0;
  int64_t ctx = 0;
  std::vector<double> running_ppl;  // after each window, over every window so far: llama.cpp's [i]
  std::vector<double> window_ppl;   // of each window alone
};

// After each window: its index and the PPL of the windows so far.
using PerplexityProgress = std::function<void(int64_t window, double running_ppl)>;

// Scores every window with `decoder`, up to `batch_tokens` tokens per forward (see
// WindowRunner), over a KV cache of `kv_dtype`. With `base_out`, every scored position's
// log-probabilities are written to it, window by window (finish() is the caller's). Throws
// tern::Error for a batch size < 1 or a context longer than the model's.
PerplexityResult perplexity(LanguageModel& decoder, const EvalWindows& windows,
                            int64_t batch_tokens, KvDtype kv_dtype = KvDtype::F16,
                            KldBaseWriter* base_out = nullptr,
                            const PerplexityProgress& progress = {});

}  // namespace tern
