// NgramProposer: a backward scan for each suffix length, longest first. O(length × n) per
// sequence and step, small beside a forward for the lengths tern serves.
#include "tern/spec_decode/ngram_proposer.h"

#include <algorithm>

namespace tern {

void ngram_lookup(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k,
                  std::vector<int32_t>& out) {
  out.clear();
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (k < 1) return;
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= std::max<int32_t>(min_n, 1); --n) {
    const auto suffix = tokens.subspan(static_cast<size_t>(len - n));
    // The latest earlier start: an occurrence that ends before the last token, so that at
    // least one token follows it.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t to = std::min<int64_t>(len, from + k);
      out.assign(tokens.begin() + from, tokens.begin() + to);
      return;
    }
  }
}

void NgramProposer::prepare(Sequence& seq, int32_t k) {
  ngram_lookup(seq.token_ids, min_n_, max_n_, k, seq.draft_token_ids);
}

int32_t NgramProposer::max_drafts(const Sequence& seq, int32_t k) const {
  return std::min(k, static_cast<int32_t>(seq.draft_token_ids.size()));
}

void NgramProposer::propose(std::span<const DraftRequest> requests, std::span<const BlockCopy>) {
  for (const DraftRequest& r : requests)
    if (static_cast<int32_t>(r.seq->draft_token_ids.size()) > r.num_drafts)
      r.seq->draft_token_ids.resize(static_cast<size_t>(r.num_drafts));
}

}  // namespace tern
