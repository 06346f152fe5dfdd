// Picking a completion's next token from its row of logits, with every OpenAI / vLLM sampling
// parameter: min_tokens suppression, repetition / presence / frequency penalties, then greedy or
// temperature → min_p → top_k → top_p and one seeded draw. A token depends only on the request
// (params, seed, prompt, its own earlier tokens) and its logits row, never on the rest of the
// batch, so a seeded request gives the same output alone or batched.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "tern/sampling/sampling_params.h"

namespace tern {

namespace structured {
class ConstraintState;
}

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampledToken {
  int32_t token = 0;
  float logprob = 0.0f;           // of `token`, when params.logprobs is set
  std::vector<TokenLogprob> top;  // params.logprobs = k: the k most likely, most likely first
};

// One per completion (sequence): it holds the completion's RNG and penalty counts.
class Sampler {
 public:
  // seed: params.seed (the engine passes seed + completion index for n > 1) or one the engine
  // chooses. suppressed_until_min_tokens: the ids min_tokens forbids (the EOS ids unless
  // ignore_eos, plus stop_token_ids). Throws tern::Error when params are out of range.
  Sampler(const SamplingParams& params, uint64_t seed, std::span<const int32_t> prompt_token_ids,
          std::vector<int32_t> suppressed_until_min_tokens);
  ~Sampler();

  // Constrained decoding: from now on every distribution this sampler computes (sample,
  // greedy_token, probabilities) gives the tokens the constraint refuses no mass, record()
  // advances it and forget() takes the advance back, so drafts are checked against it too.
  void set_constraint(std::unique_ptr<structured::ConstraintState> constraint);
  // The constraint's grammar is complete and nothing may follow: the sequence is done after its
  // first `num_tokens` output tokens (records), or now.
  bool constraint_finished() const;
  bool constraint_finished_after(int64_t num_tokens) const;

  // logits: the raw model row, [vocab]. Applies, in vLLM's order: min_tokens suppression,
  // repetition penalty (prompt and output tokens), presence and frequency penalties (output
  // tokens), then greedy (argmax of the processed logits) or temperature → min_p → top_k →
  // top_p → one uniform draw. Logprobs are vLLM v1's default: log_softmax of the raw row.
  // Records the token in the completion's output counts. Never throws; the vocabulary-sized
  // scratch is per thread and allocated on a thread's first call.
  SampledToken sample(std::span<const float> logits);

  int32_t num_sampled() const { return num_sampled_; }

  // What speculative decoding (src/tern/spec_decode/) needs to verify drafts against this
  // completion's own processing: the distribution a step would sample from, and a way to try
  // tokens on the completion's state before keeping them. None of these throw or allocate
  // beyond the per-thread scratch.
  bool greedy() const { return temperature_ <= 0.0f; }
  // The token sample() chooses greedily: the argmax of the processed row.
  int32_t greedy_token(std::span<const float> logits) const;
  // The distribution sample() draws from, after suppression, penalties, temperature, min_p,
  // top_k and top_p. probs: [logits.size()], summing to 1 (greedy: 1 at greedy_token).
  void probabilities(std::span<const float> logits, std::span<float> probs) const;
  // What sample() reports when it picks `token` from `logits`: its logprob and the top ones.
  SampledToken report(std::span<const float> logits, int32_t token) const;
  // Uniform in [0, 1): from the completion's RNG (sample() draws one per step), and from a
  // second stream of the same seed that only drafts use, so proposing never shifts the draws
  // that accept or reject.
  double uniform();
  double uniform_for_draft();
  // Counts `token` as output, as sample() does once it has chosen; forget() takes back the
  // latest record() of that token (drafts are recorded while proposed, then forgotten).
  void record(int32_t token);
  void forget(int32_t token);

 private:
  bool penalized() const;
  // Copies `logits` into `out` ([vocab]) with NaN → -inf, then the suppression and penalties.
  void process(std::span<const float> logits, std::vector<float>& out) const;
  // Temperature, min_p, top_k, top_p and the one draw over the processed row.
  int32_t draw(std::span<const float> x);

  float temperature_, top_p_, min_p_;
  int32_t top_k_;  // <= 0: all
  float presence_penalty_, frequency_penalty_, repetition_penalty_;
  int32_t min_tokens_;
  int32_t num_logprobs_;  // -1: none
  std::mt19937_64 rng_;
  std::mt19937_64 draft_rng_;
  std::vector<int32_t> prompt_ids_;  // sorted, unique; kept only for a repetition penalty
  std::vector<int32_t> suppressed_;
  std::vector<std::pair<int32_t, int32_t>> output_counts_;  // (id, count) sorted by id; kept
                                                            // only when a penalty is on
  int32_t num_sampled_ = 0;
  std::unique_ptr<structured::ConstraintState> constraint_;
};

// The index of the largest value, the lowest on ties.
int32_t argmax(std::span<const float> logits);

// One draw from unnormalised weights [n] (>= 0) with u in [0, 1), walking ids in order: the
// first id whose running sum passes u × total (the last id with weight when rounding leaves
// u × total at the very end). All zero: 0.
int32_t pick_weighted(std::span<const float> weights, double u);

}  // namespace tern
