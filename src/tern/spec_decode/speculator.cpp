// Speculator: plan (limits, then adaptive or fixed K, probes), propose, observe (acceptance,
// counters), calibrate.
#include "tern/spec_decode/speculator.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "tern/core/error.h"
#include "tern/spec_decode/draft_length_policy.h"
#include "tern/spec_decode/forward_timing.h"

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

std::optional<SpecIdle::Why> SpecIdle::commonest_since(const SpecIdle& before) const {
  std::optional<Why> out;
  int64_t most = 0;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i] - before.steps[i] > most) {
      most = steps[i] - before.steps[i];
      out = static_cast<Why>(i);
    }
  return out;
}

std::string SpecIdle::describe(Why why) const {
  char buf[640];
  switch (why) {
    case Why::kBatchSize:
      std::snprintf(buf, sizeof buf, "%lld sequences run, disable_by_batch_size is %d",
                    static_cast<long long>(num_running), disable_by_batch_size);
      return buf;
    case Why::kNoProposal:
      return "no decoding sequence had a draft to propose (no n-gram match, too few tokens "
             "left, or tokens outside the draft's vocabulary)";
    case Why::kNoGain:
      break;
  }
  std::snprintf(buf, sizeof buf,
                "adaptive drafting found no plan faster than plain decoding: its best, K = %d at "
                "an acceptance of %.0f%% (%s), promises %.2fx plain decoding's tokens/s and it "
                "drafts from %.2fx on",
                k, 100.0 * acceptance,
                acceptance_measured ? "measured" : "assumed: nothing verified yet", gain, min_gain);
  std::string out = buf;
  if (draft_seconds > 0.0 && target_seconds > 0.0) {
    const double ratio = draft_seconds / target_seconds;
    std::snprintf(buf, sizeof buf, "; a draft forward costs %.3f ms, %.2fx the target's %.3f ms%s",
                  1e3 * draft_seconds, ratio, 1e3 * target_seconds,
                  ratio >= 0.9
                      ? " (a draft about as costly as the target gains little or nothing even "
                        "when every draft is accepted: use a smaller draft, or "
                        "\"adaptive\": false to draft anyway)"
                      : "");
    out += buf;
  }
  return out;
}

Speculator::Speculator(const SpeculativeConfig& config, std::unique_ptr<Proposer> proposer,
                       ForwardCosts& target_costs)
    : config_(config), proposer_(std::move(proposer)), target_costs_(target_costs) {
  if (!config_.enabled() || !proposer_) throw Error("internal: a speculator without a method");
  stats_.accepted_per_position.assign(static_cast<size_t>(config_.num_speculative_tokens), 0);
}

std::vector<int64_t> Speculator::calibration_sizes(int64_t max_tokens) const {
  const int64_t k1 = config_.num_speculative_tokens + 1;
  std::vector<int64_t> sizes;
  for (int64_t n = 1; n <= k1; ++n) sizes.push_back(n);
  for (int64_t n : {2 * k1, 4 * k1, 8 * k1})
    if (n <= max_tokens) sizes.push_back(n);
  return sizes;
}

std::string Speculator::calibration_summary(int64_t max_tokens) const {
  const std::vector<int64_t> sizes = calibration_sizes(max_tokens);
  const int64_t k1 = config_.num_speculative_tokens + 1;
  std::string out = proposer_->costs() ? "the target's and the draft's forwards of "
                                       : "the target's forwards of ";
  out += k1 == 1 ? "1" : "1 to " + std::to_string(k1);
  for (size_t i = static_cast<size_t>(k1); i < sizes.size(); ++i)
    out += (i + 1 == sizes.size() ? " and " : ", ") + std::to_string(sizes[i]);
  return out + (k1 == 1 && sizes.size() == 1 ? " token" : " tokens");
}

void Speculator::calibrate(LanguageModel& target, KvCache& target_cache, int64_t max_tokens) {
  const std::vector<int64_t> sizes = calibration_sizes(max_tokens);
  (void)time_forward(target, target_cache, 1, true);  // the first forward grows every buffer
  for (int64_t n : sizes) target_costs_.record(n, time_forward(target, target_cache, n, true));
  if (proposer_->costs() == nullptr) return;
  proposer_->calibrate(1);
  for (int64_t n : sizes) proposer_->calibrate(n);
}

double Speculator::acceptance(const SpecSequenceState& s) const {
  const double prior =
      (all_accepted_ + kPriorWeight * kStartAcceptance) / (all_tested_ + kPriorWeight);
  return (s.accepted + kPriorWeight * prior) / (s.tested + kPriorWeight);
}

void Speculator::plan(std::span<Candidate> running, int64_t waiting_tokens,
                      int64_t max_num_batched_tokens) {
  const int64_t draft_vocab = proposer_->draft_vocab_size();
  decoding_.clear();
  int64_t other_tokens = waiting_tokens;
  for (Candidate& c : running) {
    Sequence& seq = *c.seq;
    seq.draft_token_ids.clear();
    const int64_t uncomputed = seq.num_tokens() - seq.num_computed_tokens;
    if (uncomputed != 1 || seq.num_output_tokens() == 0) {  // prefilling (n > 1 forks after it)
      other_tokens += uncomputed;
      continue;
    }
    // Never draft past max_tokens (the target adds one token of its own) or the context.
    int64_t limit = std::min<int64_t>(config_.num_speculative_tokens, c.remaining - 1);
    if (config_.max_model_len > 0)
      limit = std::min(limit, config_.max_model_len - seq.num_tokens());
    SpecSequenceState& s = *c.state;
    for (; s.draft_vocab_checked < seq.num_tokens(); ++s.draft_vocab_checked)
      if (seq.token_ids[static_cast<size_t>(s.draft_vocab_checked)] >= draft_vocab)
        s.outside_draft_vocab = true;
    if (s.outside_draft_vocab) limit = 0;
    if (limit > 0) {
      proposer_->prepare(seq, static_cast<int32_t>(limit));
      limit = proposer_->max_drafts(seq, static_cast<int32_t>(limit));
    }
    c.limit = static_cast<int32_t>(std::max<int64_t>(limit, 0));
    decoding_.push_back(c);
  }
  const int64_t others_at_most =
      std::max<int64_t>(0, max_num_batched_tokens - static_cast<int64_t>(decoding_.size()));
  choose_drafts(decoding_, std::clamp<int64_t>(other_tokens, 0, others_at_most),
                static_cast<int64_t>(running.size()));
}

void Speculator::choose_drafts(std::span<Candidate> candidates, int64_t other_tokens,
                               int64_t num_running) {
  for (Candidate& c : candidates) {
    c.state->planned = 0;
    c.state->probing = false;
  }
  if (candidates.empty()) return;  // prefill only: nothing to draft for
  if (config_.disable_by_batch_size > 0 && num_running >= config_.disable_by_batch_size) {
    idle_.count(SpecIdle::Why::kBatchSize);
    idle_.num_running = num_running;
    idle_.disable_by_batch_size = config_.disable_by_batch_size;
    return;
  }
  const bool any_can_draft = std::any_of(candidates.begin(), candidates.end(),
                                         [](const Candidate& c) { return c.limit > 0; });
  if (!any_can_draft) {
    idle_.count(SpecIdle::Why::kNoProposal);
    return;
  }
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
  const ForwardCosts* draft_costs = proposer_->costs();
  const DraftChoice choice = choose_draft_length(
      sorted_, other_tokens, config_.num_speculative_tokens, target_costs_, draft_costs, kMinGain);
  if (choice.num_drafts == 0) {
    const int64_t b = static_cast<int64_t>(candidates.size());
    idle_.count(SpecIdle::Why::kNoGain);
    idle_.k = choice.best_k;
    idle_.acceptance = sorted_.front().acceptance;
    idle_.acceptance_measured = all_tested_ > 0.0;
    idle_.gain = choice.best_gain;
    idle_.min_gain = kMinGain;
    idle_.target_seconds = target_costs_.estimate(other_tokens + b);
    idle_.draft_seconds = draft_costs ? draft_costs->estimate(b) : 0.0;
  }
  for (size_t m = 0; m < order_.size(); ++m) {
    Candidate& c = candidates[order_[m]];
    if (m < choice.num_sequences) c.state->planned = std::min<int64_t>(choice.num_drafts, c.limit);
    if (c.state->planned > 0 || c.limit == 0) continue;
    if (c.state->probe_interval == 0) c.state->probe_interval = kFirstProbeInterval;
    if (++c.state->steps_without_drafts < c.state->probe_interval) continue;
    if (draft_costs &&
        draft_costs->estimate(proposer_->lag(*c.seq)) >
            kProbeCostShare * c.state->steps_without_drafts * target_costs_.estimate(1))
      continue;
    c.state->planned = 1;
    c.state->probing = true;
  }
}

void Speculator::propose(std::span<DraftRequest> requests, std::span<const BlockCopy> copies) {
  proposer_->propose(requests, copies);
  for (DraftRequest& r : requests) {
    std::vector<int32_t>& drafts = r.seq->draft_token_ids;
    r.num_drafts = std::min(r.num_drafts, static_cast<int32_t>(drafts.size()));
    drafts.resize(static_cast<size_t>(r.num_drafts));
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
