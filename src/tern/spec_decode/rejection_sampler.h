// Verifying a sequence's drafts against the target's logits of the same step, losslessly
// (Leviathan et al. 2023; Chen et al. 2023): with p the target's and q the draft's
// distribution after the request's own processing (penalties, temperature, min_p, top_k,
// top_p), draft x is accepted with probability min(1, p(x) / q(x)); the first rejection draws
// from norm(max(0, p − q)) and ends the run; when every draft passes, a bonus token comes from
// the last row. A point-mass draft (n-gram) has q = 1 at x. Greedy requests accept while the
// draft is the target's argmax. So every emitted token is distributed exactly as plain
// sampling's, and greedy output is plain output token for token.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tern/sampling/sampler.h"

namespace tern {

struct VerifiedTokens {
  // The accepted drafts, then the token the target chose (a correction or the bonus): 1 to
  // K + 1 tokens, each with the target's logprobs as plain sampling reports them.
  std::vector<SampledToken> tokens;
  int32_t num_accepted = 0;  // drafts accepted
};

// target_logits: [K + 1, vocab], the raw rows of the step's K + 1 positions (row i predicts the
// token after draft i; row 0 the one after the last accepted token). drafts: [K].
// draft_probs: [K, draft_vocab] (draft_vocab <= vocab; missing ids have q = 0), or empty for
// point masses. The sampler records each emitted token (its penalties and min_tokens see them
// row by row, as in plain decoding) and draws from its own RNG.
void verify_drafts(Sampler& sampler, std::span<const float> target_logits, int64_t vocab,
                   std::span<const int32_t> drafts, std::span<const float> draft_probs,
                   int64_t draft_vocab, VerifiedTokens& out);

}  // namespace tern
