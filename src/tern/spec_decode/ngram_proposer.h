// N-gram prompt lookup (vLLM's "ngram" method): no model. The longest suffix of a sequence,
// prompt_lookup_max down to prompt_lookup_min tokens long, that also occurs earlier in its
// prompt or output proposes the tokens that followed its latest earlier occurrence. Drafts
// are point masses: the verifier accepts draft x with the target's probability of x.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tern/spec_decode/proposer.h"

namespace tern {

// The lookup itself: `out` becomes up to `k` tokens that followed the latest earlier
// occurrence of the longest suffix of `tokens` of min_n..max_n tokens; empty when no suffix
// occurred before. Reuses out's capacity.
void ngram_lookup(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k,
                  std::vector<int32_t>& out);

class NgramProposer final : public Proposer {
 public:
  NgramProposer(int32_t min_n, int32_t max_n, int64_t vocab_size)
      : min_n_(min_n), max_n_(max_n), vocab_size_(vocab_size) {}

  // Looks the match up and keeps it in seq.draft_token_ids.
  void prepare(Sequence& seq, int32_t k) override;
  int32_t max_drafts(const Sequence& seq, int32_t k) const override;
  // The matches prepare() kept, cut to what was scheduled.
  void propose(std::span<const DraftRequest> requests, std::span<const BlockCopy> copies) override;
  std::span<const float> draft_probs(size_t) const override { return {}; }
  int64_t draft_vocab_size() const override { return vocab_size_; }
  int64_t lag(const Sequence&) const override { return 0; }
  const ForwardCosts* costs() const override { return nullptr; }
  void calibrate(int64_t) override {}  // a lookup, no forward: nothing to time

 private:
  int32_t min_n_, max_n_;
  int64_t vocab_size_;
};

}  // namespace tern
