// perplexity(): per window the NLL of each scored token (rows in parallel), summed in order so
// that the result does not depend on the thread count.
#include "tern/eval/perplexity.h"

#include <cmath>

#include "tern/eval/kld_base_file.h"
#include "tern/eval/log_probs.h"
#include "tern/eval/window_runner.h"
#include "tern/kernels/cpu/stealing_split.h"

namespace tern {

PerplexityResult perplexity(LanguageModel& decoder, const EvalWindows& windows,
                            int64_t batch_tokens, KvDtype kv_dtype, KldBaseWriter* base_out,
                            const PerplexityProgress& progress) {
  WindowRunner runner(decoder, windows.ctx, batch_tokens, kv_dtype);
  const int64_t vocab = decoder.config().vocab_size;
  const int64_t scored = windows.scored_per_window();
  std::vector<double> nll(static_cast<size_t>(scored));  // [scored] of the current window
  PerplexityResult r;
  r.ctx = windows.ctx;
  r.num_windows = windows.num_windows();
  double sum = 0.0, sum2 = 0.0;
  runner.run(windows, [&](int64_t w, std::span<float> logits) {
    cpu::parallel_for(scored, [&](int64_t k) {
      float* row = logits.data() + k * vocab;
      const int32_t target = windows.target(w, k);
      // The same f32 value a base file stores, so that both report the same PPL.
      if (base_out) {
        log_probs_row(row, vocab, row);
        nll[static_cast<size_t>(k)] = -static_cast<double>(row[target]);
      } else {
        nll[static_cast<size_t>(k)] =
            -static_cast<double>(log_prob(row[target], log_sum_exp(row, vocab)));
      }
    });
    if (base_out) base_out->write_window(logits);
    double window_sum = 0.0;
    for (double v : nll) {
      window_sum += v;
      sum2 += v * v;
    }
    sum += window_sum;
    r.count += scored;
    r.window_ppl.push_back(std::exp(window_sum / static_cast<double>(scored)));
    r.running_ppl.push_back(std::exp(sum / static_cast<double>(r.count)));
    if (progress) progress(w, r.running_ppl.back());
  });
  if (r.count == 0) return r;
  const double n = static_cast<double>(r.count);
  r.mean_nll = sum / n;
  r.ppl = std::exp(r.mean_nll);
  const double variance = sum2 / n - r.mean_nll * r.mean_nll;
  r.uncertainty = variance > 0 && r.count > 1 ? r.ppl * std::sqrt(variance / (n - 1)) : 0.0;
  return r;
}

}  // namespace tern
