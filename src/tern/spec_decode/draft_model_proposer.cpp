// DraftModelProposer: the catch-up forward, then one batched forward per draft position; each
// request samples its draft from its row with its own sampler (the drafts so far recorded on
// it, so penalties see them), then forgets the drafts again for the verifier to record.
#include "tern/spec_decode/draft_model_proposer.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "tern/kernels/cpu/stealing_split.h"
#include "tern/spec_decode/forward_timing.h"

namespace tern {
namespace {

constexpr size_t kNoProbs = std::numeric_limits<size_t>::max();

}  // namespace

DraftModelProposer::DraftModelProposer(Decoder& draft, int64_t num_blocks, int block_size,
                                       int64_t max_model_len, KvDtype kv_dtype)
    : draft_(draft),
      cache_(draft.kv_cache_config(num_blocks, block_size, kv_dtype)),
      batch_(static_cast<int32_t>((max_model_len + block_size - 1) / block_size), block_size) {}

void DraftModelProposer::calibrate(int64_t num_tokens) {
  costs_.record(num_tokens, time_forward(draft_, cache_, num_tokens, false));
}

void DraftModelProposer::forward() {
  const StepContext ctx = batch_.context();
  const size_t size = static_cast<size_t>(ctx.num_logit_rows() * draft_vocab_size());
  if (logits_.size() < size) logits_.resize(size);
  draft_.forward(ctx, cache_, logits_.data());
}

void DraftModelProposer::propose(std::span<const DraftRequest> requests,
                                 std::span<const BlockCopy> copies) {
  for (const BlockCopy& copy : copies) cache_.copy_block(copy.src, copy.dst);
  const size_t vocab = static_cast<size_t>(draft_vocab_size());
  probs_at_.assign(requests.size(), kNoProbs);
  num_drafts_.assign(requests.size(), 0);
  size_t rows = 0;
  int32_t max_drafts = 0;
  for (size_t r = 0; r < requests.size(); ++r) {
    requests[r].seq->draft_token_ids.clear();
    max_drafts = std::max(max_drafts, requests[r].num_drafts);
    num_drafts_[r] = requests[r].num_drafts;
    if (requests[r].sampler->greedy()) continue;
    probs_at_[r] = rows;
    rows += static_cast<size_t>(requests[r].num_drafts);
  }
  if (probs_.size() < rows * vocab) probs_.resize(rows * vocab);

  // Draft position j: the first forward feeds what each draft cache lacks (at least the last
  // sampled token), later ones the previous draft; every request still drafting gives a row.
  for (int32_t j = 0; j < max_drafts; ++j) {
    batch_.clear();
    active_.clear();
    for (size_t r = 0; r < requests.size(); ++r) {
      const DraftRequest& req = requests[r];
      if (req.num_drafts <= j) continue;
      Sequence& seq = *req.seq;
      if (j == 0) {
        tokens_.assign(seq.token_ids.begin() + seq.draft_kv.num_computed_tokens,
                       seq.token_ids.end());
        batch_.add_sequence(tokens_, static_cast<int32_t>(seq.draft_kv.num_computed_tokens),
                            seq.block_table, true);
      } else {
        const int32_t previous = seq.draft_token_ids.back();
        batch_.add_sequence(std::span<const int32_t>(&previous, 1),
                            static_cast<int32_t>(seq.num_tokens() + j - 1), seq.block_table, true);
      }
      active_.push_back(r);
    }
    // A draft position's cost is its forward and its sampling: at a 152k vocabulary a sampled
    // draft's distribution takes a large share of a small draft's step.
    const auto start = std::chrono::steady_clock::now();
    forward();
    cpu::parallel_for(active_.size(), [&](int64_t a) {
      const DraftRequest& req = requests[active_[a]];
      const auto row = std::span<const float>(logits_).subspan(a * vocab, vocab);
      int32_t token = 0;
      if (probs_at_[active_[a]] == kNoProbs) {
        token = req.sampler->greedy_token(row);
      } else {
        const auto q = std::span<float>(probs_).subspan(
            (probs_at_[active_[a]] + static_cast<size_t>(j)) * vocab, vocab);
        req.sampler->probabilities(row, q);
        token = pick_weighted(q, req.sampler->uniform_for_draft());
      }
      req.seq->draft_token_ids.push_back(token);
      req.sampler->record(token);  // the next draft's penalties see it
    });
    costs_.record(batch_.context().num_tokens(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  for (const DraftRequest& req : requests) {
    Sequence& seq = *req.seq;
    for (auto it = seq.draft_token_ids.rbegin(); it != seq.draft_token_ids.rend(); ++it)
      req.sampler->forget(*it);
    // The forwards wrote the draft's K/V up to the position of draft K − 1.
    if (req.num_drafts > 0)
      seq.draft_kv.num_computed_tokens = seq.num_tokens() + req.num_drafts - 1;
  }
}

std::span<const float> DraftModelProposer::draft_probs(size_t request) const {
  if (request >= probs_at_.size() || probs_at_[request] == kNoProbs) return {};
  const size_t vocab = static_cast<size_t>(draft_vocab_size());
  return std::span<const float>(probs_).subspan(probs_at_[request] * vocab,
                                                static_cast<size_t>(num_drafts_[request]) * vocab);
}

}  // namespace tern
