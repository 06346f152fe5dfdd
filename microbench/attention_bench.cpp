// Attention over the paged f16 KV cache with Qwen3-0.6B's heads (16 q heads, 8 kv heads,
// head_dim 128): decode at context 512 and 2048 for 1 and 8 sequences, and one sequence's
// causal prefill of 128 and 512 tokens; and the
// throughput of rms_norm and RoPE on rows of that model's shapes. Thread count: OMP_NUM_THREADS.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "tern/kernels/cpu/ops/attention.h"
#include "tern/kernels/cpu/ops/rope.h"
#include "tern/kernels/cpu/ops/row_ops.h"

namespace {

using namespace tern;
using namespace tern::cpu;

constexpr int kHeads = 16;
constexpr int kKvHeads = 8;
constexpr int kHeadDim = 128;
constexpr int kBlockSize = 16;

std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// `seqs` sequences of `ctx` random K/V rows each in a cache whose blocks are shuffled, as a
// long-running server's free list leaves them.
struct FilledCache {
  KvCache cache;
  std::vector<int32_t> tables;  // [seqs, blocks_per_seq]
  int blocks_per_seq;

  static KvCacheConfig config(int ctx, int seqs) {
    KvCacheConfig c;
    c.num_layers = 1;
    c.num_blocks = int64_t{(ctx + kBlockSize - 1) / kBlockSize} * seqs;
    c.block_size = kBlockSize;
    c.n_kv_heads = kKvHeads;
    c.head_dim = kHeadDim;
    return c;
  }

  FilledCache(int ctx, int seqs)
      : cache(config(ctx, seqs)),
        tables(cache.config().num_blocks),
        blocks_per_seq((ctx + kBlockSize - 1) / kBlockSize) {
    std::iota(tables.begin(), tables.end(), 0);
    std::shuffle(tables.begin(), tables.end(), std::mt19937(1));
    const int64_t row = cache.config().row_elems();
    for (int s = 0; s < seqs; ++s) {
      auto k = random_vector(size_t(ctx) * row, 2 + s);
      auto v = random_vector(size_t(ctx) * row, 100 + s);
      std::vector<int64_t> slots(ctx);
      for (int p = 0; p < ctx; ++p) {
        slots[p] =
            int64_t{tables[s * blocks_per_seq + p / kBlockSize]} * kBlockSize + p % kBlockSize;
      }
      cache.write(0, k.data(), v.data(), slots);
    }
  }
};

// args: context length, decoding sequences, sliding window (0: the whole context)
void BM_DecodeAttention(benchmark::State& state) {
  const int ctx = static_cast<int>(state.range(0));
  const int seqs = static_cast<int>(state.range(1));
  const auto window = static_cast<int32_t>(state.range(2));
  FilledCache f(ctx, seqs);
  std::vector<int32_t> seq_of_token(seqs), context_lens(seqs, ctx);
  std::iota(seq_of_token.begin(), seq_of_token.end(), 0);
  const AttentionBatch batch{f.tables, f.blocks_per_seq, seq_of_token, context_lens};
  auto q = random_vector(size_t(seqs) * kHeads * kHeadDim, 7);
  std::vector<float> out(q.size());
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
  for (auto _ : state) {
    paged_attention(q.data(), f.cache, 0, batch, kHeads, scale, window, nullptr, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // K and V bytes read per call; the decode bound.
  const int keys = window > 0 ? std::min(ctx, window) : ctx;
  const double kv_bytes = 2.0 * seqs * keys * f.cache.config().row_elems() * 2;
  state.counters["kv_bytes_per_s"] =
      benchmark::Counter(kv_bytes * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["tokens_per_s"] =
      benchmark::Counter(double(seqs) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeAttention)
    ->ArgNames({"ctx", "seqs", "window"})
    ->Args({512, 1, 0})
    ->Args({2048, 1, 0})
    ->Args({2048, 1, 512})
    ->Args({512, 8, 0})
    ->Args({2048, 8, 0})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// One sequence's prefill of `tokens` tokens in one step, each attending causally to the ones
// before it (one layer of `tern bench-model -p 512`).
// args: tokens
void BM_PrefillAttention(benchmark::State& state) {
  const int tokens = static_cast<int>(state.range(0));
  FilledCache f(tokens, 1);
  std::vector<int32_t> seq_of_token(tokens, 0), context_lens(tokens);
  std::iota(context_lens.begin(), context_lens.end(), 1);
  const AttentionBatch batch{f.tables, f.blocks_per_seq, seq_of_token, context_lens};
  auto q = random_vector(size_t(tokens) * kHeads * kHeadDim, 7);
  std::vector<float> out(q.size());
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
  for (auto _ : state) {
    paged_attention(q.data(), f.cache, 0, batch, kHeads, scale, 0, nullptr, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(double(tokens) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PrefillAttention)
    ->ArgNames({"tokens"})
    ->Arg(128)
    ->Arg(512)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// args: rows (tokens); dim 1024 (Qwen3-0.6B hidden size)
void BM_RmsNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), dim = 1024;
  auto x = random_vector(size_t(rows * dim), 1);
  auto w = random_vector(size_t(dim), 2);
  std::vector<float> out(x.size());
  for (auto _ : state) {
    rms_norm(x.data(), w.data(), rows, dim, 1e-6f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["rows_per_s"] =
      benchmark::Counter(double(rows) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RmsNorm)->Arg(1)->Arg(512)->UseRealTime();

// args: tokens; q (16 heads) and k (8 heads) of Qwen3-0.6B, neox layout, theta 1e6
void BM_Rope(benchmark::State& state) {
  const int64_t tokens = state.range(0);
  RopeConfig rc;
  rc.head_dim = kHeadDim;
  rc.theta = 1e6;
  rc.layout = RopeLayout::Neox;
  Rope rope(rc);
  auto q = random_vector(size_t(tokens) * kHeads * kHeadDim, 1);
  auto k = random_vector(size_t(tokens) * kKvHeads * kHeadDim, 2);
  std::vector<int32_t> positions(tokens);
  std::iota(positions.begin(), positions.end(), 100);
  for (auto _ : state) {
    rope.apply_qk(q.data(), kHeads, k.data(), kKvHeads, positions);
    benchmark::DoNotOptimize(q.data());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(double(tokens) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Rope)->Arg(1)->Arg(512)->UseRealTime();

// The same with cos/sin from a per-step table (what each layer pays once the runner has
// filled it).
void BM_RopeFromTable(benchmark::State& state) {
  const int64_t tokens = state.range(0);
  RopeConfig rc;
  rc.head_dim = kHeadDim;
  rc.theta = 1e6;
  Rope rope(rc);
  auto q = random_vector(size_t(tokens) * kHeads * kHeadDim, 1);
  auto k = random_vector(size_t(tokens) * kKvHeads * kHeadDim, 2);
  std::vector<int32_t> positions(tokens);
  std::iota(positions.begin(), positions.end(), 100);
  std::vector<float> table(size_t(tokens) * kHeadDim);
  rope.fill_cos_sin(positions, table.data());
  for (auto _ : state) {
    rope.apply_qk(q.data(), kHeads, k.data(), kKvHeads, table.data(), tokens);
    benchmark::DoNotOptimize(q.data());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(double(tokens) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RopeFromTable)->Arg(1)->Arg(512)->UseRealTime();

}  // namespace
