// llama-perplexity's --kl-divergence: a model under test (Q) on the windows of a base file,
// compared position by position with the base model's log-probabilities: KL(base ‖ Q), whether
// the most likely token is the same, Δp = p_Q − p_base of the token that came next, and the
// perplexity of both, with llama.cpp's statistics and names.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tern/eval/eval_stats.h"
#include "tern/eval/kld_base_file.h"
#include "tern/models/language_model.h"

namespace tern {

struct Percentile {
  double fraction = 0.0;  // 0.999 = "99.9%"
  double value = 0.0;
};

// The fractions llama-perplexity prints, in its order (its maximum, median and minimum apart).
inline constexpr double kKldPercentiles[] = {0.999, 0.99, 0.95, 0.90, 0.10, 0.05, 0.01, 0.001};
inline constexpr double kPDiffPercentiles[] = {0.999, 0.99, 0.95, 0.90, 0.75,
                                               0.25,  0.10, 0.05, 0.01, 0.001};

struct KlDivergenceResult {
  int64_t count = 0;  // scored positions
  int64_t num_windows = 0;
  int64_t ctx = 0;
  int64_t same_top_count = 0;  // positions whose most likely token is the base's

  Estimate ppl_q;                    // Mean PPL(Q)
  Estimate ppl_base;                 // Mean PPL(base)
  double log_ppl_correlation = 0.0;  // Cor(ln(PPL(Q)), ln(PPL(base))), in [−1, 1]
  Estimate log_ppl_ratio;            // Mean ln(PPL(Q)/PPL(base))
  Estimate ppl_ratio;                // Mean PPL(Q)/PPL(base)
  Estimate ppl_difference;           // Mean PPL(Q)-PPL(base)
  Estimate kld;                      // Mean KLD
  Estimate p_diff;                   // Mean Δp (a probability, not %)
  Estimate rms_p_diff;               // RMS Δp
  Estimate same_top;                 // Same top p (a fraction)

  // The distributions, in the final result only (progress reports leave them empty / 0).
  double kld_maximum = 0.0, kld_median = 0.0, kld_minimum = 0.0;
  std::vector<Percentile> kld_percentiles;  // kKldPercentiles
  double p_diff_maximum = 0.0, p_diff_median = 0.0, p_diff_minimum = 0.0;
  std::vector<Percentile> p_diff_percentiles;  // kPDiffPercentiles
  std::vector<double> kld_values;              // [count]: window by window, position by position
  std::vector<double> p_diff_values;           // [count]
  std::vector<uint8_t> same_top_values;        // [count]: 1 where the most likely tokens agree
};

// After each window: its index and the means over the windows so far (no distributions).
using KlDivergenceProgress = std::function<void(int64_t window, const KlDivergenceResult& so_far)>;

// Runs `decoder` on the base file's windows (the first `max_windows` when > 0), up to
// `batch_tokens` tokens per forward. Throws tern::Error naming the file when its vocabulary is
// not the model's, or a row of it is not a distribution (values finite, ≤ 0, probabilities
// summing to 1 within 1e-3).
KlDivergenceResult kl_divergence(LanguageModel& decoder, const KldBaseFile& base,
                                 int64_t batch_tokens, KvDtype kv_dtype = KvDtype::F16,
                                 int64_t max_windows = -1,
                                 const KlDivergenceProgress& progress = {});

}  // namespace tern
