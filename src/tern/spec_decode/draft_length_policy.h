// How many tokens a step drafts (adaptive drafting): the K, and which sequences draft, that
// promise the most output tokens per second, from each sequence's measured acceptance and the
// measured costs of the step's verify forward and of the draft forwards. A useless draft, or a
// batch so large that verifying K more tokens per sequence costs more than they bring, gives
// K = 0: plain decoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tern/spec_decode/forward_costs.h"

namespace tern {

// The tokens a step yields for one sequence that drafts k tokens, each accepted with
// probability `alpha` until the first rejection, plus the target's own token:
// 1 + α + … + α^k = (1 − α^(k+1)) / (1 − α).
double expected_tokens(double alpha, int32_t k);

struct DraftCandidate {
  double acceptance = 0.0;  // estimated probability that a draft is accepted
  int32_t max_drafts = 0;   // at most this many (K, the tokens left, the proposal's length)
  int64_t lag = 1;          // tokens the draft model's first forward runs for it (>= 1)
  int64_t remaining = 1;    // tokens the sequence may still generate (max_tokens, context)
};

struct DraftChoice {
  int32_t num_drafts = 0;    // K of this step; 0: nobody drafts
  size_t num_sequences = 0;  // the first this many candidates draft min(K, their max_drafts)
  double gain = 1.0;         // expected tokens per second against not drafting
  // The best plan priced, taken or not: with num_drafts 0, why nobody drafts (the log says so).
  int32_t best_k = 0;
  double best_gain = 0.0;
};

// `candidates`: every sequence that decodes this step, the most likely to accept first.
// `other_tokens`: the step's other tokens (prefill chunks). `target` prices a forward of n
// tokens; `draft` a draft forward (nullptr: drafting costs nothing, as n-gram lookup). A step
// of K drafts costs T(other + B + Σk) + D(Σ lag) + (K − 1)·D(m) for m drafting sequences. A
// lag beyond the last token (the draft's cache catching up on tokens it has not seen, as a
// whole prompt at first) is paid once, so it is spread over the steps the sequence has left.
// Drafting is chosen only when it promises at least `min_gain` times the rate without it.
DraftChoice choose_draft_length(std::span<const DraftCandidate> candidates, int64_t other_tokens,
                                int32_t max_k, const ForwardCosts& target,
                                const ForwardCosts* draft, double min_gain);

}  // namespace tern
