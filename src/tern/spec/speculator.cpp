// Speculator: plan (adaptive or fixed K, probes), observe (acceptance, counters), calibrate.
#include "tern/spec/speculator.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "tern/core/error.h"
#include "tern/spec/draft_length_policy.h"

namespace tern {
namespace {

// Decay of a sequence's acceptance counts per verify, and of the engine-wide prior's: a
// sequence's text changes character within tens of tokens (a quote n-gram lookup can copy,
// then free prose), the draft's quality against the target much more slowly.
constexpr double kSequenceDecay = 0.8;
constexpr double kPriorDecay = 0.98;
// The prior counts as this many tested drafts in a sequence's estimate, and so does its own
// start, an acceptance typical of a draft of the target's family (0.6-0.8): optimistic enough
// that a real draft is tried, and one or two verifies of a useless one bring it down.
constexpr double kStartAcceptance = 0.7;
constexpr double kPriorWeight = 2.0;
// Drafting must promise this much more than plain decoding: the cost estimates are averages
// of a noisy host, and a promise of +1% is as likely a loss.
constexpr double kMinGain = 1.03;
// A sequence the plan leaves without drafts still drafts one token after this many steps, to
// see whether its acceptance has changed; each probe that accepts nothing doubles the wait.
constexpr int32_t kFirstProbeInterval = 16;
constexpr int32_t kMaxProbeInterval = 512;
// A probe first catches the draft's cache up on every token since its last draft: it is skipped
// while that would cost more than this share of the target's time over those steps. A draft
// whose catch-up costs more per token than this share of a target decode step (a draft a third
// of the target's size) is then never probed: the plan alone brings it back.
constexpr double kProbeCostShare = 0.03;

}  // namespace

double SpecDecodeStats::acceptance_rate() const {
  return num_draft_tokens > 0 ? static_cast<double>(num_accepted_tokens) / num_draft_tokens : 0.0;
}

double SpecDecodeStats::mean_acceptance_length() const {
  return num_drafts > 0 ? 1.0 + static_cast<double>(num_accepted_tokens) / num_drafts : 0.0;
}

std::string SpecDecodeStats::summary() const {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "acceptance rate %.1f%% (%lld of %lld draft tokens), mean acceptance length %.2f "
                "(%lld verifies)",
                100.0 * acceptance_rate(), static_cast<long long>(num_accepted_tokens),
                static_cast<long long>(num_draft_tokens), mean_acceptance_length(),
                static_cast<long long>(num_drafts));
  return buf;
}

Speculator::Speculator(const SpeculativeConfig& config, std::unique_ptr<Proposer> proposer)
    : config_(config), proposer_(std::move(proposer)) {
  if (!config_.enabled() || !proposer_) throw Error("internal: a speculator without a method");
  stats_.accepted_per_position.assign(static_cast<size_t>(config_.num_speculative_tokens), 0);
}

void Speculator::calibrate(ModelRunner& runner, int64_t max_tokens) {
  const int64_t k1 = config_.num_speculative_tokens + 1;
  std::vector<int64_t> sizes;
  for (int64_t n = 1; n <= k1; ++n) sizes.push_back(n);
  for (int64_t n : {2 * k1, 4 * k1, 8 * k1})
    if (n <= max_tokens) sizes.push_back(n);
  (void)runner.time_forward(1, true);  // the first forward grows every buffer
  for (int64_t n : sizes) target_costs_.record(n, runner.time_forward(n, true));
  if (proposer_->costs() == nullptr) return;
  proposer_->calibrate(1);
  for (int64_t n : sizes) proposer_->calibrate(n);
}

double Speculator::acceptance(const SpecSequenceState& s) const {
  const double prior = (all_accepted_ + kPriorWeight * kStartAcceptance) / (all_tested_ + kPriorWeight);
  return (s.accepted + kPriorWeight * prior) / (s.tested + kPriorWeight);
}

void Speculator::plan(std::span<Candidate> candidates, int64_t other_tokens, int64_t num_running) {
  for (Candidate& c : candidates) {
    c.state->planned = 0;
    c.state->probing = false;
  }
  if (config_.disable_by_batch_size > 0 && num_running >= config_.disable_by_batch_size) return;
  if (!config_.adaptive) {
    for (Candidate& c : candidates) c.state->planned = c.limit;
    return;
  }
  order_.resize(candidates.size());
  std::iota(order_.begin(), order_.end(), size_t{0});
  alpha_.resize(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) alpha_[i] = acceptance(*candidates[i].state);
  std::stable_sort(order_.begin(), order_.end(),
                   [&](size_t a, size_t b) { return alpha_[a] > alpha_[b]; });
  sorted_.clear();
  for (size_t i : order_)
    sorted_.push_back({alpha_[i], candidates[i].limit, proposer_->lag(*candidates[i].seq),
                       candidates[i].remaining});
  const DraftChoice choice =
      choose_draft_length(sorted_, other_tokens, config_.num_speculative_tokens, target_costs_,
                          proposer_->costs(), kMinGain);
  for (size_t m = 0; m < order_.size(); ++m) {
    Candidate& c = candidates[order_[m]];
    if (m < choice.num_sequences) c.state->planned = std::min<int64_t>(choice.num_drafts, c.limit);
    if (c.state->planned > 0 || c.limit == 0) continue;
    if (c.state->probe_interval == 0) c.state->probe_interval = kFirstProbeInterval;
    if (++c.state->steps_without_drafts < c.state->probe_interval) continue;
    const ForwardCosts* draft_costs = proposer_->costs();
    if (draft_costs && draft_costs->estimate(proposer_->lag(*c.seq)) >
                           kProbeCostShare * c.state->steps_without_drafts * target_costs_.estimate(1))
      continue;
    c.state->planned = 1;
    c.state->probing = true;
  }
}

void Speculator::observe(SpecSequenceState& s, int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  const double tested = accepted + (accepted < drafted ? 1.0 : 0.0);
  s.accepted = kSequenceDecay * s.accepted + accepted;
  s.tested = kSequenceDecay * s.tested + tested;
  all_accepted_ = kPriorDecay * all_accepted_ + accepted;
  all_tested_ = kPriorDecay * all_tested_ + tested;
  s.steps_without_drafts = 0;
  if (s.probing)
    s.probe_interval =
        accepted == 0 ? std::min(2 * s.probe_interval, kMaxProbeInterval) : kFirstProbeInterval;
  ++stats_.num_drafts;
  stats_.num_draft_tokens += drafted;
  stats_.num_accepted_tokens += accepted;
  for (int32_t i = 0; i < accepted && i < static_cast<int32_t>(stats_.accepted_per_position.size());
       ++i)
    ++stats_.accepted_per_position[static_cast<size_t>(i)];
}

}  // namespace tern
