// Speculative decoding as the engine's step sees it, and spec_decode/'s one header for the
// engine: before scheduling, plan how many drafts each decoding sequence asks for (adaptive
// drafting, or K whenever it can); after scheduling, let the proposer draft; verify the drafts
// against the target's rows; learn from what was accepted. It owns the proposer, the measured
// costs and acceptance, and vLLM's spec-decode counters. The config, the proposer factory and
// the draft model's loading come with it, so the engine includes nothing else of spec_decode/.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tern/backend/kv_cache.h"
#include "tern/sampling/sampler.h"
#include "tern/scheduler/sequence.h"
#include "tern/spec_decode/draft_length_policy.h"
#include "tern/spec_decode/draft_model.h"
#include "tern/spec_decode/forward_costs.h"
#include "tern/spec_decode/make_proposer.h"
#include "tern/spec_decode/proposer.h"
#include "tern/spec_decode/rejection_sampler.h"
#include "tern/spec_decode/speculative_config.h"

namespace tern {

class LanguageModel;

// vLLM's spec_decode_* counters.
struct SpecDecodeStats {
  int64_t num_drafts = 0;  // verifies: a sequence that drafted in a step
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  std::vector<int64_t> accepted_per_position;  // [num_speculative_tokens]: accepted at draft i

  // accepted / drafted, and 1 + accepted / drafts (the tokens a verify yields).
  double acceptance_rate() const;
  double mean_acceptance_length() const;
  // "acceptance rate 85.0% (2760 of 3248 drafts), mean acceptance length 4.40 (812 verifies)".
  std::string summary() const;
};

// Why steps that had sequences to decode drafted nothing, for the log: speculation that is
// configured but idle must say why (a draft as costly as the target never pays).
struct SpecIdle {
  enum class Why {
    kBatchSize,   // num_running reached disable_by_batch_size
    kNoProposal,  // no sequence could draft (no n-gram match, its last token, draft vocabulary)
    kNoGain,      // the adaptive policy priced every plan below plain decoding's rate
  };
  std::array<int64_t, 3> steps{};  // by Why, cumulative
  // The latest step of each reason: kBatchSize's sequences running and the config's bound …
  int64_t num_running = 0;
  int32_t disable_by_batch_size = 0;
  // … kNoGain's best plan, and what the policy priced it at.
  int32_t k = 0;                     // its K
  double acceptance = 0.0;           // per-draft acceptance estimated for the likeliest sequence
  bool acceptance_measured = false;  // false: no verify yet, the estimate is the starting guess
  double gain = 0.0;                 // its tokens/s over plain decoding's
  double min_gain = 0.0;             // drafting needs at least this gain
  double target_seconds = 0.0;       // a plain step of the target (the decoding sequences)
  double draft_seconds = 0.0;        // a draft forward for as many sequences (0: no draft model)

  void count(Why why) { ++steps[static_cast<size_t>(why)]; }
  // The reason of most steps since `before` (an earlier copy); nullopt when there were none.
  std::optional<Why> commonest_since(const SpecIdle& before) const;
  // `why` in the policy's terms: "adaptive drafting found no plan faster than …".
  std::string describe(Why why) const;
};

// What the speculator remembers of one sequence between its steps.
struct SpecSequenceState {
  // Acceptance as decayed counts: a verify that accepted a of k drafts tested a positions and
  // one more when a < k (the first rejection), the maximum-likelihood estimate of a per-draft
  // acceptance from such runs.
  double accepted = 0.0;
  double tested = 0.0;
  int32_t steps_without_drafts = 0;
  int32_t probe_interval = 0;  // 0: the first interval
  bool probing = false;        // this step's drafts are a probe (the plan chose none)
  int64_t planned = 0;         // drafts it asks for this step
  // A draft model with fewer vocabulary rows than the target cannot read an id past them: a
  // sequence that holds one never drafts (checked as its tokens grow).
  int64_t draft_vocab_checked = 0;
  bool outside_draft_vocab = false;
};

class Speculator {
 public:
  // Throws tern::Error for a disabled config.
  // `target_costs`: the engine's record of its steps' seconds (forward and sampling) by tokens,
  // which calibrate fills first; it must outlive this.
  Speculator(const SpeculativeConfig& config, std::unique_ptr<Proposer> proposer,
             ForwardCosts& target_costs);

  // Times forwards of the target (`target` over its `target_cache`) and of the draft of the
  // sizes a verify and a draft step of up to K + 1 tokens per sequence take, so the first plans
  // have costs to go by. The caches must hold nothing yet. `max_tokens`: the step budget.
  void calibrate(LanguageModel& target, KvCache& target_cache, int64_t max_tokens);
  // What calibrate(…, max_tokens) times, for the start-up log: "the target's and the draft's
  // forwards of 1 to 5, 10 and 20 tokens".
  std::string calibration_summary(int64_t max_tokens) const;

  struct Candidate {
    Sequence* seq = nullptr;  // runs this step
    SpecSequenceState* state = nullptr;
    int32_t limit = 0;      // drafts it may verify at most (plan() sets it)
    int64_t remaining = 1;  // tokens it may still generate (max_tokens, context)
  };
  // Before scheduling, over the running sequences: sets the state->planned of each that decodes
  // (one uncomputed token after an output token) within its limit (K, `remaining`, the draft's
  // max_model_len and vocabulary, what the proposer has prepared for it). `waiting_tokens`: the
  // queued sequences' tokens; `max_num_batched_tokens`: the step budget.
  void plan(std::span<Candidate> running, int64_t waiting_tokens, int64_t max_num_batched_tokens);
  // plan()'s choice over decoding candidates whose limits are set: each one's state->planned.
  // `other_tokens`: the step's tokens besides the candidates' (prefill); `num_running`:
  // sequences running (disable_by_batch_size).
  void choose_drafts(std::span<Candidate> candidates, int64_t other_tokens, int64_t num_running);

  // After scheduling: the proposer drafts for `requests` (every step, so that a cache of its own
  // copies the step's `copies` too); each request's num_drafts becomes what it gave, and
  // seq.draft_token_ids holds exactly those.
  void propose(std::span<DraftRequest> requests, std::span<const BlockCopy> copies);
  // Verifies `drafts` (those of request `request` of the latest propose()) against
  // target_logits, [1 + drafts.size(), vocab]. Const: requests verify in parallel.
  void verify(Sampler& sampler, std::span<const float> target_logits, int64_t vocab,
              std::span<const int32_t> drafts, size_t request, VerifiedTokens& out) const {
    verify_drafts(sampler, target_logits, vocab, drafts, proposer_->draft_probs(request),
                  proposer_->draft_vocab_size(), out);
  }

  // A verify of `drafted` drafts accepted the first `accepted`.
  void observe(SpecSequenceState& state, int32_t drafted, int32_t accepted);
  Proposer& proposer() { return *proposer_; }
  const SpeculativeConfig& config() const { return config_; }
  const SpecDecodeStats& stats() const { return stats_; }
  const SpecIdle& idle() const { return idle_; }
  const ForwardCosts& target_costs() const { return target_costs_; }

 private:
  double acceptance(const SpecSequenceState& state) const;

  SpeculativeConfig config_;
  std::unique_ptr<Proposer> proposer_;
  // The forward sizes calibrate times: 1 to K + 1 (one sequence's draft and verify steps),
  // then 2, 4 and 8 times K + 1 within the step budget (several sequences').
  std::vector<int64_t> calibration_sizes(int64_t max_tokens) const;

  ForwardCosts& target_costs_;
  SpecDecodeStats stats_;
  SpecIdle idle_;
  double all_accepted_ = 0.0, all_tested_ = 0.0;  // every sequence's, decayed: the prior
  std::vector<double> alpha_;                     // this step's estimates, by candidate
  std::vector<size_t> order_;                     // candidates, most likely to accept first
  std::vector<DraftCandidate> sorted_;
  std::vector<Candidate> decoding_;  // plan()'s candidates that decode
};

}  // namespace tern
