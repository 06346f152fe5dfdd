// The per-step work speculative decoding adds besides forwards, at Qwen's vocabulary: verifying
// K = 4 drafts of one sequence (greedy, and sampled against a draft distribution), the n-gram
// lookup over a 4,096-token sequence, and the adaptive policy's choice for 64 sequences.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tern/spec_decode/draft_length_policy.h"
#include "tern/spec_decode/ngram_proposer.h"
#include "tern/spec_decode/rejection_sampler.h"

namespace {

constexpr int64_t kVocab = 151936;
constexpr int kDrafts = 4;

std::vector<float> random_rows(size_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(rows * kVocab);
  for (auto& x : v) x = dist(rng);
  return v;
}

void BM_VerifyGreedy(benchmark::State& state) {
  const std::vector<float> target = random_rows(kDrafts + 1, 1);
  tern::SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 1 << 30;
  tern::Sampler sampler(p, 1, {}, {});
  std::vector<int32_t> drafts(kDrafts);
  for (int i = 0; i < kDrafts; ++i)
    drafts[i] = tern::argmax(std::span<const float>(target).subspan(i * kVocab, kVocab));
  tern::VerifiedTokens out;
  for (auto _ : state) {
    tern::verify_drafts(sampler, target, kVocab, drafts, {}, kVocab, out);
    benchmark::DoNotOptimize(out.num_accepted);
  }
}

void BM_VerifySampled(benchmark::State& state) {
  const std::vector<float> target = random_rows(kDrafts + 1, 1),
                           draft_logits = random_rows(kDrafts, 2);
  tern::SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.max_tokens = 1 << 30;
  tern::Sampler sampler(p, 1, {}, {});
  std::vector<float> q(kDrafts * kVocab);
  std::vector<int32_t> drafts(kDrafts);
  for (int i = 0; i < kDrafts; ++i) {
    const auto qi = std::span<float>(q).subspan(i * kVocab, kVocab);
    sampler.probabilities(std::span<const float>(draft_logits).subspan(i * kVocab, kVocab), qi);
    drafts[i] = tern::pick_weighted(qi, sampler.uniform_for_draft());
  }
  tern::VerifiedTokens out;
  for (auto _ : state) {
    tern::verify_drafts(sampler, target, kVocab, drafts, q, kVocab, out);
    benchmark::DoNotOptimize(out.num_accepted);
  }
}

void BM_NgramLookup4096(benchmark::State& state) {
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(4096);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % 2000);
  std::vector<int32_t> out;
  for (auto _ : state) {
    tern::ngram_lookup(tokens, 2, 5, kDrafts, out);
    benchmark::DoNotOptimize(out.data());
  }
}

void BM_ChooseDraftLength64(benchmark::State& state) {
  tern::ForwardCosts target, draft;
  for (int64_t n : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}) {
    target.record(n, 0.02 + 0.0005 * static_cast<double>(n));
    draft.record(n, 0.001 + 0.0001 * static_cast<double>(n));
  }
  std::vector<tern::DraftCandidate> c(64);
  for (size_t i = 0; i < c.size(); ++i) c[i] = {0.9 - 0.01 * static_cast<double>(i), 8, 1, 200};
  for (auto _ : state)
    benchmark::DoNotOptimize(tern::choose_draft_length(c, 0, 8, target, &draft, 1.03));
}

BENCHMARK(BM_VerifyGreedy);
BENCHMARK(BM_VerifySampled);
BENCHMARK(BM_NgramLookup4096);
BENCHMARK(BM_ChooseDraftLength64);

}  // namespace
