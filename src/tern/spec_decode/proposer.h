// The one interface of speculative decoding's proposers (a draft model, n-gram prompt lookup):
// given the sequences that draft this step and how many tokens each may draft, fill in their
// draft tokens. The engine verifies them against the target in the step's one forward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tern/sampling/sampler.h"
#include "tern/scheduler/sequence.h"
#include "tern/spec_decode/forward_costs.h"

namespace tern {

// One sequence that drafts in this step.
struct DraftRequest {
  Sequence* seq = nullptr;
  Sampler* sampler = nullptr;  // the completion's: its processing and its draft RNG
  int32_t num_drafts = 0;      // the scheduler made room for this many drafts
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  // Before scheduling, for a sequence that may draft up to `k` tokens: readies what
  // max_drafts() and propose() work from. N-gram lookup searches now and keeps its match in
  // seq.draft_token_ids; a draft model has nothing to ready (it drafts in propose()).
  virtual void prepare(Sequence& /*seq*/, int32_t /*k*/) {}
  // How many drafts it can give `seq` now, at most `k`, once prepare(seq, k) ran.
  virtual int32_t max_drafts(const Sequence& seq, int32_t k) const = 0;

  // Sets seq->draft_token_ids of every request to at most num_drafts tokens. `copies` are the
  // blocks the step copies in the target's cache before its forward (copy on write): a
  // proposer with a cache of its own copies them there first.
  virtual void propose(std::span<const DraftRequest> requests,
                       std::span<const BlockCopy> copies) = 0;

  // The distributions request i's drafts were sampled from, [num drafts, draft_vocab_size()],
  // as the request's sampler processes the draft's logits; empty when each draft is a point
  // mass (n-gram, or a greedy request). Valid until the next propose().
  virtual std::span<const float> draft_probs(size_t request) const = 0;
  virtual int64_t draft_vocab_size() const = 0;

  // Tokens of `seq` that its cache lacks, which its first forward of a step runs before the
  // first draft (0 without a cache).
  virtual int64_t lag(const Sequence& seq) const = 0;
  // Its forwards' measured costs; nullptr when it runs no model.
  virtual const ForwardCosts* costs() const = 0;
  // Times one of its forwards of `num_tokens` tokens into costs() (nothing to time without a
  // model). Only while its cache holds nothing anyone will read.
  virtual void calibrate(int64_t num_tokens) = 0;
};

}  // namespace tern
