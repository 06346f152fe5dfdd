#include "tern/kernels/cpu/ops/attention.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {
namespace {

struct Shape {
  int n_heads;
  int n_kv_heads;
  int head_dim;
  int block_size;
  KvDtype dtype = KvDtype::F16;
};

// Sequences with random K/V in a cache whose blocks are handed out in a scrambled order, and
// the same K/V kept as f32 (read back from the cache, so rounded to its dtype) for the
// reference.
struct Fixture {
  Shape shape;
  std::vector<int> seq_lens;
  int max_blocks = 0;
  std::vector<int32_t> block_tables;     // [num_seqs, max_blocks]
  std::vector<std::vector<float>> keys;  // per seq: [len, n_kv_heads, head_dim]
  std::vector<std::vector<float>> values;
  KvCache cache;

  static KvCacheConfig cache_config(const Shape& s, const std::vector<int>& lens) {
    KvCacheConfig c;
    c.num_layers = 2;
    c.block_size = s.block_size;
    c.n_kv_heads = s.n_kv_heads;
    c.head_dim = s.head_dim;
    c.dtype = s.dtype;
    for (int len : lens) c.num_blocks += (len + s.block_size - 1) / s.block_size;
    c.num_blocks += 3;  // spare blocks that no sequence uses
    return c;
  }

  Fixture(const Shape& s, std::vector<int> lens, uint32_t seed, int layer = 1)
      : shape(s), seq_lens(std::move(lens)), cache(cache_config(s, seq_lens)) {
    // Separate streams: the K/V values do not depend on how many blocks were shuffled.
    std::mt19937 rng(seed);
    std::mt19937 kv_rng(seed + 1000);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int64_t nb = cache.config().num_blocks;
    std::vector<int32_t> order(nb);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int len : seq_lens)
      max_blocks = std::max(max_blocks, (len + s.block_size - 1) / s.block_size);
    max_blocks += 1;  // a padded column
    block_tables.assign(seq_lens.size() * max_blocks, -1);
    const int64_t row = cache.config().row_elems();
    size_t next = 0;
    for (size_t q = 0; q < seq_lens.size(); ++q) {
      const int len = seq_lens[q];
      for (int b = 0; b < (len + s.block_size - 1) / s.block_size; ++b) {
        block_tables[q * max_blocks + b] = order[next++];
      }
      std::vector<float> k(len * row), v(len * row);
      for (auto& x : k) x = dist(kv_rng);
      for (auto& x : v) x = dist(kv_rng);
      std::vector<int64_t> slots(len);
      for (int p = 0; p < len; ++p) {
        slots[p] = int64_t{block_tables[q * max_blocks + p / s.block_size]} * s.block_size +
                   p % s.block_size;
      }
      cache.write(layer, k.data(), v.data(), slots);
      for (int p = 0; p < len; ++p) {
        cache.read_slot(layer, slots[p], k.data() + p * row, v.data() + p * row);
      }
      keys.push_back(std::move(k));
      values.push_back(std::move(v));
    }
  }
};

struct Token {
  int seq;
  int pos;
};

struct Step {
  std::vector<int32_t> seq_of_token;
  std::vector<int32_t> context_lens;
  AttentionBatch batch(const Fixture& f) const {
    return AttentionBatch{f.block_tables, f.max_blocks, seq_of_token, context_lens};
  }
};

Step make_step(const std::vector<Token>& tokens) {
  Step s;
  for (const Token& t : tokens) {
    s.seq_of_token.push_back(t.seq);
    s.context_lens.push_back(t.pos + 1);
  }
  return s;
}

std::vector<float> random_q(size_t tokens, const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> q(tokens * s.n_heads * s.head_dim);
  for (auto& x : q) x = dist(rng);
  return q;
}

// The definition, in double.
std::vector<double> reference(const Fixture& f, const std::vector<Token>& tokens,
                              const std::vector<float>& q, double scale, int window = 0,
                              const float* sinks = nullptr) {
  const Shape& s = f.shape;
  const int group = s.n_heads / s.n_kv_heads;
  std::vector<double> out(q.size());
  for (size_t t = 0; t < tokens.size(); ++t) {
    const auto& k = f.keys[tokens[t].seq];
    const auto& v = f.values[tokens[t].seq];
    const int ctx = tokens[t].pos + 1;
    const int lo = window > 0 ? std::max(0, ctx - window) : 0;  // the first key it sees
    for (int h = 0; h < s.n_heads; ++h) {
      const int kvh = h / group;
      const float* qh = q.data() + (t * s.n_heads + h) * s.head_dim;
      std::vector<double> p(ctx, 0.0);
      double max = -1e300;
      for (int j = lo; j < ctx; ++j) {
        const float* kj = k.data() + (int64_t{j} * s.n_kv_heads + kvh) * s.head_dim;
        double dot = 0;
        for (int d = 0; d < s.head_dim; ++d) dot += double(qh[d]) * kj[d];
        p[j] = dot * scale;
        max = std::max(max, p[j]);
      }
      // A sink is one more logit in the softmax, with no value.
      if (sinks != nullptr) max = std::max(max, double(sinks[h]));
      double sum = sinks != nullptr ? std::exp(sinks[h] - max) : 0.0;
      for (int j = lo; j < ctx; ++j) sum += p[j] = std::exp(p[j] - max);
      double* o = out.data() + (t * s.n_heads + h) * s.head_dim;
      for (int j = lo; j < ctx; ++j) {
        const float* vj = v.data() + (int64_t{j} * s.n_kv_heads + kvh) * s.head_dim;
        for (int d = 0; d < s.head_dim; ++d) o[d] += p[j] / sum * vj[d];
      }
    }
  }
  return out;
}

std::vector<float> run(const Fixture& f, const std::vector<Token>& tokens,
                       const std::vector<float>& q, float scale, int layer = 1, int window = 0,
                       const float* sinks = nullptr) {
  Step step = make_step(tokens);
  AttentionBatch batch = step.batch(f);
  check_attention_batch(batch, f.cache, f.shape.n_heads);
  std::vector<float> out(q.size(), 12345.0f);  // garbage: the kernel must overwrite it
  paged_attention(q.data(), f.cache, layer, batch, f.shape.n_heads, scale, window, sinks,
                  out.data());
  return out;
}

void expect_matches_reference(const Shape& s, std::vector<int> lens,
                              const std::vector<Token>& tokens, uint32_t seed) {
  Fixture f(s, std::move(lens), seed);
  auto q = random_q(tokens.size(), s, seed + 1);
  const float scale = 1.0f / std::sqrt(float(s.head_dim));
  auto got = run(f, tokens, q, scale);
  auto want = reference(f, tokens, q, scale);
  // f32 sums of a few hundred terms of O(1) values: well under 1e-5 absolute.
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5) << i;
}

TEST(Attention, MatchesReferenceThroughScrambledBlockTable) {
  Shape s{4, 4, 64, 16};
  expect_matches_reference(s, {100}, {{0, 0}, {0, 1}, {0, 15}, {0, 16}, {0, 57}, {0, 99}}, 1);
}

TEST(Attention, GroupedQueryHeads) {
  // 4 q heads per kv head, odd block size, head_dim with a tail after 16-lane chunks.
  expect_matches_reference({8, 2, 72, 5}, {33, 70}, {{0, 32}, {1, 69}, {1, 3}}, 2);
  // 12 q heads on one kv head: more than the kernel's group of 8 at a time.
  expect_matches_reference({12, 1, 32, 16}, {40}, {{0, 39}, {0, 20}}, 3);
}

TEST(Attention, OtherCacheTypes) {
  expect_matches_reference({4, 2, 64, 16, KvDtype::F32}, {50}, {{0, 49}, {0, 10}}, 4);
  expect_matches_reference({4, 2, 64, 16, KvDtype::BF16}, {50}, {{0, 49}, {0, 10}}, 5);
}

// The 8-bit caches: attention reads codes and scales to the same values read_slot gives
// (odd head_dim: the dequantizers' tails; block size 5: rows cross blocks).
TEST(Attention, EightBitCachesMatchTheirOwnValues) {
  for (KvDtype dtype : {KvDtype::Int8, KvDtype::Fp8E4M3, KvDtype::Fp8E5M2}) {
    SCOPED_TRACE(std::string(kv_dtype_name(dtype)));
    expect_matches_reference({8, 2, 72, 5, dtype}, {33, 70}, {{0, 32}, {1, 69}, {1, 3}}, 2);
    expect_matches_reference({4, 2, 128, 16, dtype}, {90}, {{0, 89}, {0, 17}}, 3);
  }
}

// The same K/V (N(0, 1)) in an f16 and an 8-bit cache: outputs within what each type's rounding
// moves them. Measured max |Δ| over these 6144 outputs: int8 0.015, fp8_e4m3 0.047, fp8_e5m2
// 0.066; the bounds are 2× that (int8's step is max|x| / 127 ≈ 0.025 here, E4M3's relative
// step 1/8, E5M2's 1/4).
TEST(Attention, EightBitCachesStayNearF16) {
  struct Case {
    KvDtype dtype;
    double bound;
  };
  const std::vector<Token> tokens{{0, 200}, {0, 40}, {1, 99}};
  for (const Case& c :
       {Case{KvDtype::Int8, 0.03}, Case{KvDtype::Fp8E4M3, 0.1}, Case{KvDtype::Fp8E5M2, 0.14}}) {
    const Shape f16_shape{16, 8, 128, 16, KvDtype::F16};
    Shape q_shape = f16_shape;
    q_shape.dtype = c.dtype;
    Fixture f16(f16_shape, {201, 100}, 31);
    Fixture quant(q_shape, {201, 100}, 31);
    const auto q = random_q(tokens.size(), f16_shape, 32);
    const float scale = 1.0f / std::sqrt(128.0f);
    const auto want = run(f16, tokens, q, scale);
    const auto got = run(quant, tokens, q, scale);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, double(std::fabs(got[i] - want[i])));
    EXPECT_LT(worst, c.bound) << kv_dtype_name(c.dtype);
    EXPECT_GT(worst, 0.0) << kv_dtype_name(c.dtype) << ": no rounding at all is suspicious";
  }
}

TEST(Attention, ZeroContextGivesZeros) {
  Shape s{2, 1, 16, 4};
  Fixture f(s, {4}, 6);
  Step step{{0}, {0}};
  auto q = random_q(1, s, 7);
  std::vector<float> out(q.size(), 1.0f);
  paged_attention(q.data(), f.cache, 1, step.batch(f), s.n_heads, 0.25f, 0, nullptr, out.data());
  for (float x : out) EXPECT_EQ(x, 0.0f);
}

// A token's output is the same bits alone (T=1), inside a mixed batch of decodes and a prefill
// chunk in any order, and with 1 or 2 threads.
TEST(Attention, BatchInvariant) {
  Shape s{16, 8, 128, 16};  // Qwen3-0.6B's heads
  Fixture f(s, {90, 40, 130}, 8);
  std::vector<Token> mixed{{0, 89}};                      // decode
  for (int p = 10; p < 40; ++p) mixed.push_back({1, p});  // prefill chunk 10..39
  mixed.push_back({2, 129});                              // decode
  mixed.push_back({2, 17});                               // e.g. a verify position
  auto q = random_q(mixed.size(), s, 9);
  const float scale = 1.0f / std::sqrt(128.0f);
  const int64_t row = int64_t{s.n_heads} * s.head_dim;

  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(2);
  auto batched = run(f, mixed, q, scale);
  omp_set_num_threads(1);
  auto batched_one_thread = run(f, mixed, q, scale);
  omp_set_num_threads(saved_threads);
  EXPECT_EQ(batched, batched_one_thread);

  for (size_t t = 0; t < mixed.size(); ++t) {
    std::vector<float> qt(q.begin() + t * row, q.begin() + (t + 1) * row);
    auto alone = run(f, {mixed[t]}, qt, scale);
    for (int64_t i = 0; i < row; ++i) ASSERT_EQ(alone[i], batched[t * row + i]) << "token " << t;
  }
  // Reversed batch order.
  std::vector<Token> reversed(mixed.rbegin(), mixed.rend());
  std::vector<float> q_rev(q.size());
  for (size_t t = 0; t < mixed.size(); ++t) {
    std::copy(q.begin() + t * row, q.begin() + (t + 1) * row,
              q_rev.begin() + (mixed.size() - 1 - t) * row);
  }
  auto rev = run(f, reversed, q_rev, scale);
  for (size_t t = 0; t < mixed.size(); ++t) {
    for (int64_t i = 0; i < row; ++i) {
      ASSERT_EQ(rev[(mixed.size() - 1 - t) * row + i], batched[t * row + i]) << "token " << t;
    }
  }
}

// Runs `tokens` (with q rows `q`) with 1 and 2 threads and checks that every token's output is
// the same bits as when it runs alone; returns the batched output.
std::vector<float> expect_same_bits_as_alone(const Fixture& f, const std::vector<Token>& tokens,
                                             const std::vector<float>& q, float scale) {
  const int64_t row = int64_t{f.shape.n_heads} * f.shape.head_dim;
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(2);
  auto batched = run(f, tokens, q, scale);
  omp_set_num_threads(1);
  auto one_thread = run(f, tokens, q, scale);
  omp_set_num_threads(saved_threads);
  EXPECT_EQ(batched, one_thread);
  for (size_t t = 0; t < tokens.size(); ++t) {
    std::vector<float> qt(q.begin() + t * row, q.begin() + (t + 1) * row);
    auto alone = run(f, {tokens[t]}, qt, scale);
    for (int64_t i = 0; i < row; ++i) {
      EXPECT_EQ(alone[i], batched[t * row + i]) << "token " << t << " element " << i;
      if (alone[i] != batched[t * row + i]) return batched;
    }
  }
  return batched;
}

// The q rows of tokens [first, first + count) of a step.
std::vector<float> q_rows(const std::vector<float>& q, const Shape& s, size_t first, size_t count) {
  const size_t row = size_t(s.n_heads) * s.head_dim;
  return std::vector<float>(q.begin() + first * row, q.begin() + (first + count) * row);
}

// A long prefill is cut into runs of consecutive tokens that share each loaded K/V chunk. Where
// the cuts fall (the step starting at another token, a step of another length) must not
// change a token's bits: compare the whole prefill, steps starting at every offset 0..9 and
// every token alone. Context lengths 1..45 cover chunks cut short at every length.
TEST(Attention, PrefillRunsGiveSameBitsWhereverTheyAreCut) {
  const Shape s{16, 8, 128, 16};
  Fixture f(s, {45}, 20);
  std::vector<Token> prefill;
  for (int p = 0; p < 45; ++p) prefill.push_back({0, p});
  auto q = random_q(prefill.size(), s, 21);
  const float scale = 1.0f / std::sqrt(128.0f);
  const auto whole = expect_same_bits_as_alone(f, prefill, q, scale);
  const size_t row = size_t(s.n_heads) * s.head_dim;
  for (size_t first = 1; first < 10; ++first) {
    for (size_t count : {size_t{3}, size_t{45} - first}) {
      std::vector<Token> part(prefill.begin() + first, prefill.begin() + first + count);
      auto out = run(f, part, q_rows(q, s, first, count), scale);
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_EQ(out[i], whole[first * row + i]) << "step from " << first << ", " << count;
      }
    }
  }
  auto want = reference(f, prefill, q, scale);
  for (size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(whole[i], want[i], 2e-5) << i;
}

// Tokens of two sequences back to back in the flat batch (a run must not cross from one to the
// other), a sequence's tokens out of order (verify positions) and a token with no context
// between tokens of the same sequence.
TEST(Attention, RunsStopAtSequenceBoundaries) {
  const Shape s{8, 2, 64, 16};
  Fixture f(s, {37, 29}, 22);
  std::vector<Token> tokens;
  for (int p = 20; p < 37; ++p) tokens.push_back({0, p});
  for (int p = 0; p < 29; ++p) tokens.push_back({1, p});
  tokens.push_back({0, 36});
  tokens.push_back({0, 3});
  tokens.push_back({0, 17});
  auto q = random_q(tokens.size() + 2, s, 23);
  const float scale = 0.125f;
  expect_same_bits_as_alone(f, tokens, q_rows(q, s, 0, tokens.size()), scale);
  expect_matches_reference(s, {37, 29}, tokens, 22);

  // A zero-context token inside a run of sequence 1: zeros, and its neighbours unchanged.
  Step step = make_step({{1, 10}, {1, 11}, {1, 12}});
  step.context_lens[1] = 0;
  const auto q3 = q_rows(q, s, 0, 3);
  std::vector<float> out(q3.size(), 7.0f);
  paged_attention(q3.data(), f.cache, 1, step.batch(f), s.n_heads, scale, 0, nullptr, out.data());
  const auto first = run(f, {{1, 10}}, q_rows(q, s, 0, 1), scale);
  const size_t row = size_t(s.n_heads) * s.head_dim;
  for (size_t i = 0; i < row; ++i) {
    ASSERT_EQ(out[i], first[i]);
    ASSERT_EQ(out[row + i], 0.0f);
  }
  auto third = run(f, {{1, 12}}, q_rows(q, s, 2, 1), scale);
  for (size_t i = 0; i < row; ++i) ASSERT_EQ(out[2 * row + i], third[i]);
}

// Prefill runs with more q heads per kv head than the kernel takes at once (12 on 1), and with
// a head_dim that is not a multiple of 16 and an odd block size.
TEST(Attention, PrefillRunsWithLargeGroupsAndOddHeadDim) {
  for (const Shape& s :
       {Shape{12, 1, 32, 16}, Shape{8, 2, 72, 5}, Shape{4, 2, 40, 16, KvDtype::F32}}) {
    Fixture f(s, {50}, 24);
    std::vector<Token> tokens;
    for (int p = 5; p < 50; ++p) tokens.push_back({0, p});
    auto q = random_q(tokens.size(), s, 25);
    const float scale = 1.0f / std::sqrt(float(s.head_dim));
    const auto out = expect_same_bits_as_alone(f, tokens, q, scale);
    const auto want = reference(f, tokens, q, scale);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 2e-5) << i;
  }
}

// Batch invariance holds for every KV dtype: alone or in a run, the same bits.
TEST(Attention, EveryKvDtypeIsBatchInvariant) {
  for (KvDtype dtype : {KvDtype::BF16, KvDtype::Int8, KvDtype::Fp8E4M3, KvDtype::Fp8E5M2}) {
    const Shape s{8, 2, 72, 5, dtype};
    Fixture f(s, {50}, 24);
    std::vector<Token> tokens;
    for (int p = 5; p < 50; ++p) tokens.push_back({0, p});
    auto q = random_q(tokens.size(), s, 25);
    expect_same_bits_as_alone(f, tokens, q, 1.0f / std::sqrt(72.0f));
  }
}

// Key chunks follow absolute positions, not cache blocks: the same K/V in caches of different
// block sizes give the same bits, though blocks of 16 are read in place and blocks of 3
// converted row by row.
TEST(Attention, IndependentOfBlockSize) {
  for (KvDtype dtype : {KvDtype::F16, KvDtype::BF16, KvDtype::F32, KvDtype::Int8, KvDtype::Fp8E4M3,
                        KvDtype::Fp8E5M2}) {
    SCOPED_TRACE(std::string(kv_dtype_name(dtype)));
    const std::vector<Token> tokens{{0, 70}, {0, 5}};
    Fixture a({4, 2, 64, 16, dtype}, {71}, 10);
    Fixture b({4, 2, 64, 3, dtype}, {71}, 10);  // same seed → same K/V values, other blocks
    ASSERT_EQ(a.keys, b.keys);
    auto q = random_q(tokens.size(), a.shape, 11);
    EXPECT_EQ(run(a, tokens, q, 0.125f), run(b, tokens, q, 0.125f));
  }
}

// Every level this CPU runs gives the scalar twin's bits, for every cache dtype, rows read in
// place (blocks of 16, decodes) and converted (blocks of 5, head_dim 72 with its tail; a
// prefill run sharing each chunk).
TEST(Attention, EveryLevelGivesTheScalarTwinsBits) {
  for (KvDtype dtype : {KvDtype::F16, KvDtype::BF16, KvDtype::F32, KvDtype::Int8, KvDtype::Fp8E4M3,
                        KvDtype::Fp8E5M2}) {
    SCOPED_TRACE(std::string(kv_dtype_name(dtype)));
    for (const Shape& s : {Shape{8, 2, 64, 16, dtype}, Shape{8, 2, 72, 5, dtype}}) {
      Fixture f(s, {70, 40}, 40);
      std::vector<Token> tokens{{0, 69}, {1, 39}};
      for (int p = 3; p < 30; ++p) tokens.push_back({1, p});
      const auto q = random_q(tokens.size(), s, 41);
      const Step step = make_step(tokens);
      const AttentionBatch batch = step.batch(f);
      // Whole contexts, sliding windows of 20 keys, and sinks.
      const std::vector<float> sinks = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, -0.25f, 3.0f, 0.75f};
      for (const std::pair<int, bool>& setting :
           {std::pair{0, false}, std::pair{20, false}, std::pair{0, true}}) {
        const int window = setting.first;
        const bool sink = setting.second;
        auto at_level = [&](Isa isa) {
          std::vector<float> out(q.size(), 12345.0f);
          paged_attention(q.data(), f.cache, 1, batch, s.n_heads, 0.125f, window,
                          sink ? sinks.data() : nullptr, out.data(), isa);
          return out;
        };
        const std::vector<float> scalar = at_level(Isa::Scalar);
        for (Isa isa : isa_levels()) {
          if (!isa_supported(isa)) continue;
          const std::vector<float> got = at_level(isa);
          ASSERT_EQ(0, std::memcmp(got.data(), scalar.data(), got.size() * sizeof(float)))
              << isa_name(isa) << ", head_dim " << s.head_dim << ", window " << window;
        }
      }
    }
  }
}

// Sliding-window attention: a token sees its last `window` keys (its own included), windows
// shorter, equal to and longer than a chunk of 16 and starting anywhere in one; the same bits
// alone or batched, prefill runs and decodes mixed.
TEST(Attention, SlidingWindowMatchesReferenceAndIsBatchInvariant) {
  const Shape s{8, 2, 64, 16};
  Fixture f(s, {70, 45}, 50);
  std::vector<Token> tokens{{0, 69}, {0, 16}};
  for (int p = 0; p < 45; ++p) tokens.push_back({1, p});
  const auto q = random_q(tokens.size(), s, 51);
  const float scale = 0.125f;
  for (int window : {1, 5, 16, 17, 40, 100}) {
    SCOPED_TRACE("window " + std::to_string(window));
    const auto got = run(f, tokens, q, scale, 1, window);
    const auto want = reference(f, tokens, q, scale, window);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5) << i;
    const int64_t row = int64_t{s.n_heads} * s.head_dim;
    for (size_t t = 0; t < tokens.size(); t += 7) {
      const auto alone = run(f, {tokens[t]}, q_rows(q, s, t, 1), scale, 1, window);
      for (int64_t i = 0; i < row; ++i)
        ASSERT_EQ(alone[static_cast<size_t>(i)], got[t * row + i]) << "token " << t;
    }
  }
  // A window as long as the context changes nothing.
  EXPECT_EQ(run(f, tokens, q, scale, 1, 70), run(f, tokens, q, scale, 1, 0));
}

// gpt-oss's sinks: a logit per q head in each softmax with no value, so the weights of the keys
// sum to less than 1; with a window too; the same bits alone or batched.
TEST(Attention, SinksMatchReferenceAndAreBatchInvariant) {
  const Shape s{8, 2, 64, 16};
  Fixture f(s, {70, 45}, 52);
  std::vector<Token> tokens{{0, 69}, {0, 0}};
  for (int p = 0; p < 45; ++p) tokens.push_back({1, p});
  const auto q = random_q(tokens.size(), s, 53);
  const float scale = 0.125f;
  const std::vector<float> sinks = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, -0.25f, 3.0f, 40.0f};
  for (int window : {0, 5}) {
    SCOPED_TRACE("window " + std::to_string(window));
    const auto got = run(f, tokens, q, scale, 1, window, sinks.data());
    const auto want = reference(f, tokens, q, scale, window, sinks.data());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5) << i;
    const int64_t row = int64_t{s.n_heads} * s.head_dim;
    for (size_t t = 0; t < tokens.size(); t += 5) {
      const auto alone = run(f, {tokens[t]}, q_rows(q, s, t, 1), scale, 1, window, sinks.data());
      for (int64_t i = 0; i < row; ++i)
        ASSERT_EQ(alone[static_cast<size_t>(i)], got[t * row + i]) << "token " << t;
    }
    // Head 7's sink of 40 outweighs every key: its output is all but zero.
    EXPECT_NEAR(got[7 * 64], 0.0, 1e-9);
  }
}

TEST(Attention, CheckRejectsInconsistentBatches) {
  Shape s{4, 2, 16, 4};
  Fixture f(s, {10}, 12);
  auto check = [&](const std::vector<int32_t>& seqs, const std::vector<int32_t>& ctx,
                   int n_heads = 4) {
    AttentionBatch b{f.block_tables, f.max_blocks, seqs, ctx};
    check_attention_batch(b, f.cache, n_heads);
  };
  EXPECT_NO_THROW(check({0, 0}, {10, 1}));
  EXPECT_THROW(check({0}, {10}, 3), Error);  // 3 q heads on 2 kv heads
  EXPECT_THROW(check({0, 0}, {10}), Error);  // sizes differ
  EXPECT_THROW(check({1}, {1}), Error);      // no such sequence row
  EXPECT_THROW(check({0}, {17}), Error);     // longer than the table's 4 blocks
  EXPECT_THROW(check({0}, {13}), Error);     // needs block entry 3, which is -1
  EXPECT_THROW(check({0}, {-1}), Error);
}

}  // namespace
}  // namespace tern::cpu
