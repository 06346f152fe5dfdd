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

#include "tern/kernels/cpu/kv_cache.h"
#include "tern/models/decoder.h"
#include "tern/models/model_loader.h"
#include "tern/models/step_context.h"
#include "tern/spec_decode/proposer.h"
#include "tern/spec_decode/speculative_config.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

// Loads the draft that `spec` names (spec.model a local path: a GGUF, a folder, or a config for
// dummy weights) the way the target was loaded, with the draft's own dtype and load format
// ("" keeps the target's). Its tokenizer is its own; a draft without one (dummy weights from a
// config) takes the target's --tokenizer. Throws tern::Error as load_model does.
LoadedModel load_draft_model(const LoadOptions& target, const SpeculativeConfig& spec);

// A draft must speak the target's vocabulary: the same token string at every id of the
// tokenizers, and model rows (embedding, lm_head) that differ at most in padding past them.
// Throws tern::Error naming the first id that differs.
void check_draft_vocabulary(const Tokenizer& target, int64_t target_rows, const Tokenizer& draft,
                            int64_t draft_rows);

class DraftModelProposer final : public Proposer {
 public:
  // `draft` must outlive the proposer. Its cache has the target's num_blocks and block_size.
  DraftModelProposer(Decoder& draft, int64_t num_blocks, int block_size, int64_t max_model_len,
                     cpu::KvDtype kv_dtype);

  int32_t max_drafts(Sequence&, int32_t k) override { return k; }
  // After it, seq.num_draft_computed_tokens counts the draft's K/V through draft K − 1 (the
  // caller cuts it back to what the verify accepts).
  void propose(std::span<const DraftRequest> requests, std::span<const BlockCopy> copies) override;
  std::span<const float> draft_probs(size_t request) const override;
  int64_t draft_vocab_size() const override { return draft_.config().vocab_size; }
  int64_t lag(const Sequence& seq) const override {
    return seq.num_tokens() - seq.num_draft_computed_tokens;
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
