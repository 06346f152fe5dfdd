// kl_divergence(): per scored position KL(base ‖ Q), same top, Δp and both NLLs (rows in
// parallel), then llama-perplexity's sums in position order, so the result does not depend on
// the thread count.
#include "tern/eval/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tern/core/error.h"
#include "tern/eval/log_probs.h"
#include "tern/eval/window_runner.h"
#include "tern/kernels/cpu/stealing_split.h"

namespace tern {
namespace {

// One scored position.
struct PositionScore {
  double kld = 0.0;
  double p_diff = 0.0;  // p_Q(next) − p_base(next)
  double nll_q = 0.0, nll_base = 0.0;
  bool same_top = false;
  bool base_valid = true;  // the base row is a distribution
};

// KL(base ‖ Q) = Σ p_base (log p_base − log p_Q) over the whole vocabulary, with Q's log-probs
// as f32 exactly as a base file would hold them; the most likely token of each is the first
// maximum of those f32 values.
PositionScore score_position(const float* logits, std::span<const float> base, int32_t next) {
  const int64_t vocab = static_cast<int64_t>(base.size());
  const double lse = log_sum_exp(logits, vocab);
  PositionScore s;
  double kld = 0.0, base_mass = 0.0;
  float top_q = -INFINITY, top_base = -INFINITY;
  int64_t argmax_q = -1, argmax_base = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    const float lq = log_prob(logits[i], lse);
    const float lb = base[static_cast<size_t>(i)];
    if (!(std::isfinite(lb) && lb <= 0.0f)) s.base_valid = false;
    if (lq > top_q) {
      top_q = lq;
      argmax_q = i;
    }
    if (lb > top_base) {
      top_base = lb;
      argmax_base = i;
    }
    const double pb = std::exp(static_cast<double>(lb));
    base_mass += pb;
    kld += pb * (static_cast<double>(lb) - static_cast<double>(lq));
  }
  if (!(std::fabs(base_mass - 1.0) < 1e-3)) s.base_valid = false;
  const float lq_next = log_prob(logits[next], lse);
  const float lb_next = base[static_cast<size_t>(next)];
  s.kld = kld;
  s.nll_q = -static_cast<double>(lq_next);
  s.nll_base = -static_cast<double>(lb_next);
  s.p_diff = std::exp(static_cast<double>(lq_next)) - std::exp(static_cast<double>(lb_next));
  s.same_top = argmax_q == argmax_base;
  return s;
}

// llama-perplexity's running sums (kl_divergence_result).
struct KldSums {
  double nll = 0, nll2 = 0, nll_base = 0, nll_base2 = 0, nll_nll_base = 0;
  double kld = 0, kld2 = 0, p_diff = 0, p_diff2 = 0, p_diff4 = 0;
  int64_t same_top = 0, count = 0;

  void add(const PositionScore& s) {
    nll += s.nll_q;
    nll2 += s.nll_q * s.nll_q;
    nll_base += s.nll_base;
    nll_base2 += s.nll_base * s.nll_base;
    nll_nll_base += s.nll_q * s.nll_base;
    kld += s.kld;
    kld2 += s.kld * s.kld;
    p_diff += s.p_diff;
    const double d2 = s.p_diff * s.p_diff;
    p_diff2 += d2;
    p_diff4 += d2 * d2;
    same_top += s.same_top ? 1 : 0;
    ++count;
  }
};

// The means and their uncertainties as llama-perplexity prints them. Where llama.cpp would
// divide 0 by 0 (a model against itself), the uncertainty is 0.
void set_means(const KldSums& s, KlDivergenceResult& r) {
  r.count = s.count;
  r.same_top_count = s.same_top;
  const Estimate log_ppl = mean_and_uncertainty(s.nll, s.nll2, s.count);
  const Estimate log_ppl_base = mean_and_uncertainty(s.nll_base, s.nll_base2, s.count);
  const double cov = covariance_of_means(s.nll, s.nll_base, s.nll_nll_base, s.count);
  r.ppl_q = {std::exp(log_ppl.value), std::exp(log_ppl.value) * log_ppl.uncertainty};
  r.ppl_base = {std::exp(log_ppl_base.value),
                std::exp(log_ppl_base.value) * log_ppl_base.uncertainty};
  const double unc_product = log_ppl.uncertainty * log_ppl_base.uncertainty;
  r.log_ppl_correlation = unc_product > 0 ? cov / unc_product : 0.0;
  const double ratio_var = log_ppl.uncertainty * log_ppl.uncertainty +
                           log_ppl_base.uncertainty * log_ppl_base.uncertainty - 2.0 * cov;
  r.log_ppl_ratio = {log_ppl.value - log_ppl_base.value, std::sqrt(std::max(0.0, ratio_var))};
  r.ppl_ratio = {std::exp(r.log_ppl_ratio.value),
                 std::exp(r.log_ppl_ratio.value) * r.log_ppl_ratio.uncertainty};
  const double ppl_cov = r.ppl_q.value * r.ppl_base.value * cov;
  const double diff_var = r.ppl_q.uncertainty * r.ppl_q.uncertainty +
                          r.ppl_base.uncertainty * r.ppl_base.uncertainty - 2.0 * ppl_cov;
  r.ppl_difference = {r.ppl_q.value - r.ppl_base.value, std::sqrt(std::max(0.0, diff_var))};
  r.kld = mean_and_uncertainty(s.kld, s.kld2, s.count);
  r.p_diff = mean_and_uncertainty(s.p_diff, s.p_diff2, s.count);
  const Estimate mse = mean_and_uncertainty(s.p_diff2, s.p_diff4, s.count);
  const double rms = std::sqrt(mse.value);
  r.rms_p_diff = {rms, rms > 0 ? 0.5 / rms * mse.uncertainty : 0.0};
  const double top =
      s.count > 0 ? static_cast<double>(s.same_top) / static_cast<double>(s.count) : 0.0;
  r.same_top = {top,
                s.count > 1 ? std::sqrt(top * (1 - top) / static_cast<double>(s.count - 1)) : 0.0};
}

void set_distributions(KlDivergenceResult& r) {
  if (r.kld_values.empty()) return;
  std::vector<double> kld = r.kld_values, p_diff = r.p_diff_values;
  std::sort(kld.begin(), kld.end());
  std::sort(p_diff.begin(), p_diff.end());
  r.kld_maximum = kld.back();
  r.kld_median = median(kld);
  r.kld_minimum = kld.front();
  for (double f : kKldPercentiles) r.kld_percentiles.push_back({f, percentile(kld, f)});
  r.p_diff_maximum = p_diff.back();
  r.p_diff_median = median(p_diff);
  r.p_diff_minimum = p_diff.front();
  for (double f : kPDiffPercentiles) r.p_diff_percentiles.push_back({f, percentile(p_diff, f)});
}

}  // namespace

KlDivergenceResult kl_divergence(LanguageModel& decoder, const KldBaseFile& base,
                                 int64_t batch_tokens, KvDtype kv_dtype, int64_t max_windows,
                                 const KlDivergenceProgress& progress) {
  const int64_t vocab = decoder.config().vocab_size;
  if (base.vocab_size() != vocab)
    throw Error(base.path() + ": made with a vocabulary of " + std::to_string(base.vocab_size()) +
                " tokens, the model under test has " + std::to_string(vocab));
  EvalWindows windows = base.windows();
  if (max_windows > 0 && max_windows < windows.num_windows())
    windows.tokens.resize(static_cast<size_t>(max_windows * windows.ctx));
  WindowRunner runner(decoder, windows.ctx, batch_tokens, kv_dtype);
  const int64_t scored = windows.scored_per_window();
  std::vector<PositionScore> scores(static_cast<size_t>(scored));  // of the current window
  KldSums sums;
  KlDivergenceResult r;
  r.ctx = windows.ctx;
  r.num_windows = windows.num_windows();
  runner.run(windows, [&](int64_t w, std::span<float> logits) {
    cpu::parallel_for(scored, [&](int64_t k) {
      scores[static_cast<size_t>(k)] =
          score_position(logits.data() + k * vocab, base.log_probs(w, k), windows.target(w, k));
    });
    for (int64_t k = 0; k < scored; ++k) {
      const PositionScore& s = scores[static_cast<size_t>(k)];
      if (!s.base_valid)
        throw Error(base.path() + ": the log-probabilities of window " + std::to_string(w + 1) +
                    ", position " + std::to_string(windows.first_scored() + k) +
                    " are not a distribution (values must be finite, <= 0, and their probabilities "
                    "sum to 1)");
      sums.add(s);
      r.kld_values.push_back(s.kld);
      r.p_diff_values.push_back(s.p_diff);
      r.same_top_values.push_back(s.same_top ? 1 : 0);
    }
    if (progress) {
      KlDivergenceResult so_far;
      set_means(sums, so_far);
      so_far.ctx = r.ctx;
      so_far.num_windows = w + 1;
      progress(w, so_far);
    }
  });
  set_means(sums, r);
  set_distributions(r);
  return r;
}

}  // namespace tern
