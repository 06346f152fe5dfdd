// A draft model as proposer (vLLM's "draft_model"): any model tern loads, with a paged KV cache
// of its own that is indexed by the target's block ids, so every block decision of the
// target's BlockManager (prefix hits, copy on write, forks, preemption, frees) holds for the
// draft's K/V too. A step drafts for all its sequences at once: one forward that catches each
// sequence's draft cache up and yields draft 1, then one single-token forward per further
// draft position for the whole batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tern/kernels/cpu/kv/kv_cache.h"
#include "tern/models/decoder.h"
#include "tern/models/step_context.h"
#include "tern/spec_decode/proposer.h"

namespace tern {

class DraftModelProposer final : public Proposer {
 public:
  // `draft` must outlive the proposer. Its cache has the target's num_blocks and block_size.
  DraftModelProposer(Decoder& draft, int64_t num_blocks, int block_size, int64_t max_model_len,
                     KvDtype kv_dtype);

  int32_t max_drafts(const Sequence&, int32_t k) const override { return k; }
  // After it, seq.draft_kv.num_computed_tokens counts the draft's K/V through draft K − 1 (the
  // caller cuts it back to what the verify accepts).
  void propose(std::span<const DraftRequest> requests, std::span<const BlockCopy> copies) override;
  std::span<const float> draft_probs(size_t request) const override;
  int64_t draft_vocab_size() const override { return draft_.config().vocab_size; }
  int64_t lag(const Sequence& seq) const override {
    return seq.num_tokens() - seq.draft_kv.num_computed_tokens;
  }
  const ForwardCosts* costs() const override { return &costs_; }

  void calibrate(int64_t num_tokens) override;
  const cpu::KvCache& cache() const { return cache_; }

 private:
  // Runs batch_; logits_ holds the rows.
  void forward();

  Decoder& draft_;
  cpu::KvCache cache_;
  StepBatch batch_;
  ForwardCosts costs_;
  std::vector<float> logits_;        // [rows, draft vocab]
  std::vector<float> probs_;         // the sampled requests' q rows, [Σ drafts, draft vocab]
  std::vector<size_t> probs_at_;     // per request: its first q row, or kNoProbs
  std::vector<int32_t> num_drafts_;  // per request: its q rows
  std::vector<int32_t> tokens_;      // one request's catch-up tokens
  std::vector<size_t> active_;       // requests in the current draft forward
};

}  // namespace tern
