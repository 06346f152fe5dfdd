// verify_drafts: one pass over the K + 1 rows; the target's distribution of a row is computed
// only when the request samples (greedy compares argmaxes).
#include "tern/spec_decode/rejection_sampler.h"

#include <algorithm>

namespace tern {
namespace {

std::vector<float>& target_probs() {
  thread_local std::vector<float> p;  // [vocab]: one row's p, then its residual
  return p;
}

}  // namespace

void verify_drafts(Sampler& sampler, std::span<const float> target_logits, int64_t vocab,
                   std::span<const int32_t> drafts, std::span<const float> draft_probs,
                   int64_t draft_vocab, VerifiedTokens& out) {
  out.tokens.clear();
  out.num_accepted = 0;
  const size_t k = drafts.size();
  const size_t v = static_cast<size_t>(vocab);
  std::vector<float>& p = target_probs();
  for (size_t i = 0; i <= k; ++i) {
    const auto row = target_logits.subspan(i * v, v);
    int32_t token = 0;
    bool accepted = false;
    if (sampler.greedy()) {
      token = sampler.greedy_token(row);
      accepted = i < k && token == drafts[i];
    } else {
      p.resize(v);
      sampler.probabilities(row, p);
      if (i == k) {
        token = pick_weighted(p, sampler.uniform());  // the bonus: every draft passed
      } else {
        const int32_t x = drafts[i];
        const auto q = draft_probs.empty()
                           ? std::span<const float>()
                           : draft_probs.subspan(i * static_cast<size_t>(draft_vocab),
                                                 static_cast<size_t>(draft_vocab));
        const float qx = q.empty() ? 1.0f : (x < draft_vocab ? q[static_cast<size_t>(x)] : 0.0f);
        // Accept with probability min(1, p(x) / q(x)), as u·q(x) < p(x) for u in [0, 1).
        const double u = sampler.uniform();
        accepted = qx > 0.0f && u * qx < p[static_cast<size_t>(x)];
        token = x;
        if (!accepted) {
          // The residual norm(max(0, p − q)): what p has that q's proposals did not cover.
          double mass = 0.0;
          if (q.empty()) {
            p[static_cast<size_t>(x)] = 0.0f;
            for (float w : p) mass += w;
          } else {
            for (size_t j = 0; j < v; ++j) {
              const float qj = j < q.size() ? q[j] : 0.0f;
              p[j] = std::max(0.0f, p[j] - qj);
              mass += p[j];
            }
          }
          // p = q to rounding: a rejection had probability ~0; p itself is then the residual.
          if (!(mass > 0.0)) sampler.probabilities(row, p);
          token = pick_weighted(p, sampler.uniform());
        }
      }
    }
    out.tokens.push_back(sampler.report(row, token));
    sampler.record(token);
    if (!accepted) break;
    ++out.num_accepted;
  }
}

}  // namespace tern
