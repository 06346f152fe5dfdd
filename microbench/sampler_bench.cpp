// One sampling step over a Qwen-sized row (151,936 logits, normal with σ 3) for the common
// parameter sets: what the engine pays per sequence per decode step on top of the forward.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tern/sampling/sampler.h"

namespace {

constexpr size_t kVocab = 151936;

std::vector<float> random_row() {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(kVocab);
  for (auto& x : v) x = dist(rng);
  return v;
}

void run(benchmark::State& state, const tern::SamplingParams& p) {
  const std::vector<float> row = random_row();
  tern::Sampler sampler(p, 1, {}, {2});
  for (auto _ : state) benchmark::DoNotOptimize(sampler.sample(row).token);
}

tern::SamplingParams params(float temperature, int32_t top_k, float top_p, float min_p) {
  tern::SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.max_tokens = 1 << 30;
  return p;
}

void BM_Greedy(benchmark::State& s) { run(s, params(0.0f, 0, 1.0f, 0.0f)); }
void BM_Temperature(benchmark::State& s) { run(s, params(1.0f, 0, 1.0f, 0.0f)); }
void BM_TopK20TopP095(benchmark::State& s) { run(s, params(0.7f, 20, 0.95f, 0.0f)); }
void BM_TopP09(benchmark::State& s) { run(s, params(1.0f, 0, 0.9f, 0.0f)); }
void BM_MinP005(benchmark::State& s) { run(s, params(1.0f, 0, 1.0f, 0.05f)); }
void BM_GreedyPenaltiesLogprobs5(benchmark::State& s) {
  tern::SamplingParams p = params(0.0f, 0, 1.0f, 0.0f);
  p.presence_penalty = 0.5f;
  p.repetition_penalty = 1.1f;
  p.logprobs = 5;
  run(s, p);
}

BENCHMARK(BM_Greedy);
BENCHMARK(BM_Temperature);
BENCHMARK(BM_TopK20TopP095);
BENCHMARK(BM_TopP09);
BENCHMARK(BM_MinP005);
BENCHMARK(BM_GreedyPenaltiesLogprobs5);

}  // namespace
