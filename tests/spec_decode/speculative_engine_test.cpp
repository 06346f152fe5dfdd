// Speculative decoding through the engine. Greedy speculation must give plain decoding's ids and
// logprobs bit for bit (batch invariance makes the verify's rows the plain rows), with either
// proposer, under load: mixed batches with chunked prefill, prefix-cache hits, preemption in a
// tiny cache, n > 1, stops and max_tokens inside an accepted run, aborts. Seeded sampling with a
// fixed K is batch invariant too, and keeps plain sampling's distribution (checked against the
// exact distribution of the first tokens). A mismatched draft vocabulary is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numbers>
#include <random>

#include "spec_decode/spec_test_util.h"
#include "tern/core/error.h"
#include "tern/engine/sequence_runner.h"
#include "tern/spec_decode/draft_model_proposer.h"
#include "tern/tokenizer/sentencepiece_model.h"

namespace tern {
namespace {

using testing::expect_same_outputs;
using testing::greedy;
using testing::random_prompts;
using testing::small_engine;
using testing::speculative_engine;
using testing::stories260k;

// The noise of the draft in the distribution test: its acceptance at temperature 1 is about half.
constexpr double kDistributionDraftNoise = 0.2;

std::vector<SamplingParams> greedy_mix(int count, int max_tokens) {
  std::vector<SamplingParams> params;
  for (int i = 0; i < count; ++i) params.push_back(greedy(1 + (i * 7) % max_tokens));
  return params;
}

// A draft model LLM: stories260K speculating with `draft`.
LLM with_draft(LoadedModel draft, const EngineConfig& config) {
  return LLM(stories260k(), config, std::move(draft));
}

void expect_drafted_and_rejected(const EngineStats& s, const std::string& what) {
  EXPECT_TRUE(s.speculative) << what;
  EXPECT_GT(s.spec.num_draft_tokens, 0) << what;
  EXPECT_GT(s.spec.num_accepted_tokens, 0) << what << ": no draft was ever accepted";
  EXPECT_LT(s.spec.num_accepted_tokens, s.spec.num_draft_tokens) << what << ": none was rejected";
}

// 48 prompts, chunked prefill under a small budget, a cold and a warm prefix cache.
void expect_greedy_equals_plain(LLM& spec, const std::string& what, bool expect_rejections = true) {
  const auto prompts = random_prompts(48, 120, 512, 5);
  const auto params = greedy_mix(48, 40);
  LLM plain(stories260k(), small_engine(48));
  const auto reference = plain.generate(prompts, params);
  expect_same_outputs(spec.generate(prompts, params), reference, what + ", cold cache");
  const auto warm = spec.generate(prompts, params);
  EXPECT_GT(spec.engine().stats().prefix_cache_hits, 0);
  expect_same_outputs(warm, reference, what + ", warm prefix cache");
  EXPECT_EQ(spec.engine().stats().kv_cache_usage, 0.0) << what;
  if (expect_rejections) expect_drafted_and_rejected(spec.engine().stats(), what);
}

TEST(SpeculativeEngine, GreedyDraftModelEqualsPlainBitForBit) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  {
    LLM spec = with_draft(testing::stories260k_as(DType::Q4_0),
                          speculative_engine(SpeculativeMethod::kDraftModel, 4, false, 48));
    expect_greedy_equals_plain(spec, "Q4_0 draft, K = 4");
  }
  {
    LLM spec = with_draft(testing::noisy_stories260k(0.5),
                          speculative_engine(SpeculativeMethod::kDraftModel, 3, false, 48));
    expect_greedy_equals_plain(spec, "noisy draft, K = 3");
  }
  {  // adaptive: whatever K the costs choose, the tokens are plain decoding's
    LLM spec = with_draft(testing::stories260k_as(DType::Q8_0),
                          speculative_engine(SpeculativeMethod::kDraftModel, 6, true, 48));
    expect_greedy_equals_plain(spec, "Q8_0 draft, adaptive", false);
  }
}

TEST(SpeculativeEngine, ADraftWithTheTargetsWeightsIsKnownAsSuch) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const EngineConfig config = speculative_engine(SpeculativeMethod::kDraftModel, 4, true, 48);
  EXPECT_TRUE(with_draft(stories260k(), config).engine().draft_is_target());
  EXPECT_FALSE(with_draft(testing::stories260k_as(DType::Q8_0), config).engine().draft_is_target());
  EXPECT_FALSE(with_draft(testing::noisy_stories260k(0.01), config).engine().draft_is_target());
  LLM ngram(stories260k(), speculative_engine(SpeculativeMethod::kNgram, 4, true, 48));
  EXPECT_FALSE(ngram.engine().draft_is_target());
}

TEST(SpeculativeEngine, GreedyNgramEqualsPlainBitForBit) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  {
    LLM spec(stories260k(), speculative_engine(SpeculativeMethod::kNgram, 4, false, 48));
    expect_greedy_equals_plain(spec, "ngram, K = 4");
  }
  {
    LLM spec(stories260k(), speculative_engine(SpeculativeMethod::kNgram, 5, true, 48));
    expect_greedy_equals_plain(spec, "ngram, adaptive", false);
  }
}

TEST(SpeculativeEngine, TinyCachePreemptsAndStillGivesPlainOutputs) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const auto prompts = random_prompts(24, 100, 512, 9);
  const std::vector<SamplingParams> params(1, greedy(30));
  LLM plain(stories260k(), small_engine(64));
  const auto reference = plain.generate(prompts, params);
  for (SpeculativeMethod method : {SpeculativeMethod::kDraftModel, SpeculativeMethod::kNgram}) {
    EngineConfig tiny = speculative_engine(method, 4, false, 64);
    tiny.max_model_len = 160;
    // 12 blocks of 16 tokens: 640 bytes per token, and as much again for the draft's cache.
    tiny.kv_cache_memory =
        (method == SpeculativeMethod::kDraftModel ? 2 : 1) * 640 * 16 * 12 + 8192;
    LLM small = method == SpeculativeMethod::kDraftModel
                    ? with_draft(testing::stories260k_as(DType::Q4_0), tiny)
                    : LLM(stories260k(), tiny);
    ASSERT_LE(small.engine().stats().num_blocks, 13);
    const auto outputs = small.generate(prompts, params);
    EXPECT_GT(small.engine().stats().num_preemptions, 0);
    expect_same_outputs(outputs, reference, "tiny cache");
    EXPECT_EQ(small.engine().stats().kv_cache_usage, 0.0);
    EXPECT_GT(small.engine().stats().spec.num_accepted_tokens, 0);
  }
}

TEST(SpeculativeEngine, CompletionsOfOneRequestEachSpeculate) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const auto prompts = random_prompts(8, 60, 512, 3);
  SamplingParams p = greedy(25);
  p.n = 3;
  LLM plain(stories260k(), small_engine(64));
  const auto reference = plain.generate(prompts, {p});
  LLM spec = with_draft(testing::stories260k_as(DType::Q4_0),
                        speculative_engine(SpeculativeMethod::kDraftModel, 4, false, 64));
  const auto outputs = spec.generate(prompts, {p});
  expect_same_outputs(outputs, reference, "n = 3");
  ASSERT_EQ(outputs[0].outputs.size(), 3u);
  EXPECT_EQ(spec.engine().stats().kv_cache_usage, 0.0);
  expect_drafted_and_rejected(spec.engine().stats(), "n = 3");
}

// stories260K drafting for itself accepts every draft, so every stop is inside an accepted run.
TEST(SpeculativeEngine, AStopInsideAnAcceptedRunEndsTheOutputThere) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM plain(stories260k(), small_engine(64));
  LLM spec =
      with_draft(stories260k(), speculative_engine(SpeculativeMethod::kDraftModel, 4, false, 64));
  const std::vector<int32_t> prompt = plain.tokenizer().encode("Once upon a time");
  const auto full = plain.generate({prompt}, {greedy(60)})[0].outputs[0];
  ASSERT_EQ(full.token_ids.size(), 60u);
  std::vector<SamplingParams> cases;
  for (int max_tokens : {1, 2, 3, 7, 11, 13}) cases.push_back(greedy(max_tokens));
  // A stop id and a stop string that first come up mid-run (outputs 2-6 are one verify).
  for (size_t at : {3u, 8u, 14u}) {
    SamplingParams p = greedy(60);
    p.stop_token_ids = {full.token_ids[at]};
    cases.push_back(p);
  }
  for (const char* stop : {"little", "park", "ball."}) {
    SamplingParams p = greedy(60);
    p.stop = {stop};
    cases.push_back(p);
    p.include_stop_str_in_output = true;
    cases.push_back(p);
  }
  for (const SamplingParams& p : cases) {
    const int64_t before = spec.engine().stats().generation_tokens;
    const auto want = plain.generate({prompt}, {p});
    const auto got = spec.generate({prompt}, {p});
    expect_same_outputs(got, want, "a stop inside a run");
    EXPECT_EQ(got[0].outputs[0].stop_reason, want[0].outputs[0].stop_reason);
    // Nothing after the stop is counted as output.
    EXPECT_EQ(spec.engine().stats().generation_tokens - before,
              static_cast<int64_t>(got[0].outputs[0].token_ids.size()));
  }
  EXPECT_EQ(spec.engine().stats().spec.num_accepted_tokens,
            spec.engine().stats().spec.num_draft_tokens);
  EXPECT_EQ(spec.engine().stats().kv_cache_usage, 0.0);
}

TEST(SpeculativeEngine, AbortMidRunFreesEverythingAndSparesTheOthers) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const auto prompts = random_prompts(6, 50, 512, 21);
  LLM plain(stories260k(), small_engine(64));
  const auto reference = plain.generate(prompts, {greedy(40)});
  LLM spec = with_draft(testing::stories260k_as(DType::Q4_0),
                        speculative_engine(SpeculativeMethod::kDraftModel, 4, false, 64));
  LLMEngine& engine = spec.engine();
  for (size_t i = 0; i < prompts.size(); ++i)
    engine.add_request("r" + std::to_string(i), prompts[i], greedy(40));
  std::map<std::string, CompletionOutput> done;
  int steps = 0;
  while (engine.has_unfinished_requests()) {
    for (RequestOutput& out : engine.step())
      for (CompletionOutput& c : out.outputs)
        if (c.finished()) done[out.request_id] = c;
    if (++steps == 6) {
      EXPECT_GT(engine.stats().spec.num_drafts, 0);
      EXPECT_TRUE(engine.abort_request("r2"));
      EXPECT_TRUE(engine.abort_request("r4"));
    }
  }
  EXPECT_EQ(*done.at("r2").finish_reason, "abort");
  EXPECT_EQ(*done.at("r4").finish_reason, "abort");
  for (size_t i : {0u, 1u, 3u, 5u})
    EXPECT_EQ(done.at("r" + std::to_string(i)).token_ids, reference[i].outputs[0].token_ids) << i;
  EXPECT_EQ(engine.stats().kv_cache_usage, 0.0);
}

// With a fixed K, the drafts of a step depend on the sequence alone, so seeded speculative
// sampling is batch invariant as plain sampling is.
TEST(SpeculativeEngine, SeededSamplingWithFixedKIsBatchInvariant) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const auto prompts = random_prompts(16, 60, 512, 13);
  std::vector<SamplingParams> params;
  for (int i = 0; i < 16; ++i) {
    SamplingParams p;
    p.temperature = 0.9f;
    p.top_p = 0.95f;
    p.seed = 500 + i;
    p.max_tokens = 30;
    p.ignore_eos = true;
    p.logprobs = 1;
    params.push_back(p);
  }
  const EngineConfig config = speculative_engine(SpeculativeMethod::kDraftModel, 3, false, 256);
  LLM batched = with_draft(testing::noisy_stories260k(0.3), config);
  const auto together = batched.generate(prompts, params);
  LLM alone = with_draft(testing::noisy_stories260k(0.3), config);
  for (size_t i = 0; i < prompts.size(); ++i)
    expect_same_outputs(alone.generate({prompts[i]}, {params[i]}), {together[i]}, "seeded, alone");
  expect_drafted_and_rejected(batched.engine().stats(), "seeded");
}

// The empirical joint distribution of the first three sampled tokens over many seeds, with a
// draft that often disagrees, against the exact one computed from the target's logits. The
// first token comes from the prefill; the next two from the first verify (K = 2).
TEST(SpeculativeEngine, SampledSpeculationKeepsTheTargetDistribution) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;
  p.max_tokens = 4;
  p.ignore_eos = true;
  LoadedModel target = stories260k();
  const std::vector<int32_t> prompt = target.tokenizer->encode("Once upon a time, there was a");

  // Exact: p(t1) p(t2 | t1) p(t3 | t1, t2), each after the processing of a sampler that has
  // output the tokens before.
  using Outcome = std::array<int32_t, 3>;
  std::map<Outcome, double> exact;
  {
    Decoder decoder(target.config, target.weights, find_device("cpu"));
    SequenceRunner runner(decoder, 64);
    const size_t vocab = static_cast<size_t>(target.config.vocab_size);
    auto next = [&](const std::vector<int32_t>& outputs) {
      std::vector<int32_t> context = prompt;
      context.insert(context.end(), outputs.begin(), outputs.end());
      runner.reset();
      const std::span<const float> logits = runner.feed(context);
      Sampler s(p, 1, prompt, {});
      for (int32_t t : outputs) s.record(t);
      std::vector<float> probs(vocab);
      s.probabilities(logits, probs);
      return probs;
    };
    const std::vector<float> p1 = next({});
    for (int32_t t1 = 0; t1 < static_cast<int32_t>(vocab); ++t1) {
      if (p1[static_cast<size_t>(t1)] == 0.0f) continue;
      const std::vector<float> p2 = next({t1});
      for (int32_t t2 = 0; t2 < static_cast<int32_t>(vocab); ++t2) {
        if (p2[static_cast<size_t>(t2)] == 0.0f) continue;
        const std::vector<float> p3 = next({t1, t2});
        for (int32_t t3 = 0; t3 < static_cast<int32_t>(vocab); ++t3)
          if (p3[static_cast<size_t>(t3)] > 0.0f)
            exact[{t1, t2, t3}] = static_cast<double>(p1[static_cast<size_t>(t1)]) *
                                  p2[static_cast<size_t>(t2)] * p3[static_cast<size_t>(t3)];
      }
    }
  }
  ASSERT_LE(exact.size(), 27u);

  constexpr int kTrials = 6000;
  const std::vector<std::vector<int32_t>> prompts(kTrials, prompt);
  std::vector<SamplingParams> params(kTrials, p);
  for (int i = 0; i < kTrials; ++i) params[static_cast<size_t>(i)].seed = 9000 + i;
  LLM spec(std::move(target), speculative_engine(SpeculativeMethod::kDraftModel, 2, false, 4096),
           testing::noisy_stories260k(kDistributionDraftNoise));
  std::map<Outcome, double> got;
  for (const RequestOutput& r : spec.generate(prompts, params)) {
    const std::vector<int32_t>& t = r.outputs[0].token_ids;
    got[{t[0], t[1], t[2]}] += 1.0 / kTrials;
  }
  double tv = 0.0, noise = 0.0;
  for (const auto& [outcome, q] : exact) {
    tv += std::abs((got.count(outcome) ? got.at(outcome) : 0.0) - q) / 2.0;
    noise += std::sqrt(2.0 * q * (1.0 - q) / (std::numbers::pi * kTrials)) / 2.0;
  }
  for (const auto& [outcome, q] : got)
    if (!exact.count(outcome)) tv += q / 2.0;
  // Fixed seeds: deterministic. 2.5× the expected noise of an exact sampler; a planted bug
  // (resampling from p instead of the residual, or accepting without q) gives several times it.
  EXPECT_LT(tv, 2.5 * noise) << "total variation " << tv << ", expected noise " << noise;
  const EngineStats s = spec.engine().stats();
  expect_drafted_and_rejected(s, "sampled");
  EXPECT_GT(s.spec.acceptance_rate(), 0.2);
  EXPECT_LT(s.spec.acceptance_rate(), 0.8);
}

TEST(SpeculativeEngine, ADraftWithAnotherVocabularyIsRefusedNamingTheId) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TERN_REQUIRE_FIXTURE("tok512/tok512.model");
  TERN_REQUIRE_FIXTURE("llama-2-tiny-random/llama-2-tiny-random.gguf");
  const EngineConfig config = speculative_engine(SpeculativeMethod::kDraftModel, 4, false);
  // The same pieces but one: named by its id.
  SentencePieceModel changed = read_sentencepiece_model(testing::fixture("tok512/tok512.model"));
  changed.vocab.tokens[300] =
      "\xe2\x96\x81"
      "changed";
  changed.vocab.build_index();
  LoadedModel draft = stories260k();
  draft.tokenizer = Tokenizer::from_sentencepiece(changed);
  try {
    with_draft(std::move(draft), config);
    ADD_FAILURE() << "a draft with a different token 300 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at id 300"), std::string::npos) << e.what();
  }
  // A vocabulary of another size (Llama 2's 32,000 tokens).
  LoadOptions llama;
  llama.model = testing::fixture("llama-2-tiny-random/llama-2-tiny-random.gguf");
  const LoadedModel other = load_model(llama);
  int32_t first = 0;
  const Tokenizer t = *stories260k().tokenizer;
  while (first < t.vocab_size() &&
         t.vocab().tokens[first] == other.tokenizer->vocab().tokens[first])
    ++first;
  try {
    with_draft(load_model(llama), config);
    ADD_FAILURE() << "a draft with 32,000 tokens was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at id " + std::to_string(first)), std::string::npos)
        << e.what();
  }
  // The same tokenizer loaded from elsewhere is fine.
  LoadedModel same = stories260k();
  same.tokenizer = Tokenizer::load(testing::fixture("tok512/tok512.model"));
  EXPECT_NO_THROW(with_draft(std::move(same), config));
}

}  // namespace
}  // namespace tern
