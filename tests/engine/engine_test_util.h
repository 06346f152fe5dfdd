// Shared by the engine tests: small real and dummy models behind an LLM, and comparisons of
// whole outputs (ids and logprobs bit for bit).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fixtures.h"
#include "models/model_test_util.h"
#include "shared_tokenizer.h"
#include "tern/engine/llm.h"
#include "tern/models/model_loader.h"
#include "tern/models/weight_loader.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::testing {

inline LoadedModel stories260k() {
  LoadOptions load;
  load.model = fixture("stories260K/stories260K.gguf");
  return load_model(load);
}

// Qwen3's features (q/k norm, GQA, neox rope) at a size the sanitizers run quickly, in Q4_K so
// the batched integer GEMM runs; the real Qwen tokenizer (the model only uses its first ids).
inline LoadedModel tiny_qwen3() {
  LoadedModel m;
  m.device = &find_device("cpu");
  m.config = tiny_qwen3_config(2);
  m.weights = make_dummy_weights(m.config, DType::Q4_K, 11);
  m.tokenizer = testing::shared_tokenizer("qwen-tokenizer");
  m.description = "tiny qwen3 (dummy Q4_K)";
  return m;
}

// Greedy, past EOS, with logprobs: the outputs batch invariance compares bit for bit.
inline SamplingParams greedy(int max_tokens, int logprobs = 3) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.logprobs = logprobs;
  return p;
}

inline EngineConfig small_engine(int64_t budget = 64, bool chunked = true, bool prefix = true) {
  EngineConfig c;
  c.max_model_len = 512;
  c.kv_cache_memory = uint64_t{64} << 20;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.enable_chunked_prefill = chunked;
  c.enable_prefix_caching = prefix;
  return c;
}

// `count` prompts of random ids in [3, vocab) with lengths in [1, max_len]; every fourth one
// starts with the same 40 tokens so that prefix caching has something to find.
inline std::vector<std::vector<int32_t>> random_prompts(int count, int max_len, int32_t vocab,
                                                        uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> shared(40);
  for (auto& t : shared) t = 3 + static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab - 3));
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> p;
    if (i % 4 == 0) p = shared;
    const int len = 1 + static_cast<int>(rng() % static_cast<uint32_t>(max_len));
    while (static_cast<int>(p.size()) < len + (i % 4 == 0 ? 40 : 0))
      p.push_back(3 + static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab - 3)));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

inline bool same_logprobs(const std::vector<SampledToken>& a, const std::vector<SampledToken>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].token != b[i].token || std::memcmp(&a[i].logprob, &b[i].logprob, sizeof(float)) != 0 ||
        a[i].top.size() != b[i].top.size())
      return false;
    for (size_t k = 0; k < a[i].top.size(); ++k)
      if (a[i].top[k].token != b[i].top[k].token ||
          std::memcmp(&a[i].top[k].logprob, &b[i].top[k].logprob, sizeof(float)) != 0)
        return false;
  }
  return true;
}

// Every completion of every request: same ids, text, finish reason and logprobs, bit for bit.
inline void expect_same_outputs(const std::vector<RequestOutput>& a,
                                const std::vector<RequestOutput>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].outputs.size(), b[i].outputs.size()) << what << ", request " << i;
    for (size_t j = 0; j < a[i].outputs.size(); ++j) {
      const CompletionOutput& x = a[i].outputs[j];
      const CompletionOutput& y = b[i].outputs[j];
      EXPECT_EQ(x.token_ids, y.token_ids) << what << ", request " << i << " completion " << j;
      EXPECT_EQ(x.text, y.text) << what << ", request " << i;
      EXPECT_EQ(x.finish_reason, y.finish_reason) << what << ", request " << i;
      EXPECT_TRUE(same_logprobs(x.logprobs, y.logprobs))
          << what << ", request " << i << " logprobs";
    }
  }
}

// Each prompt through its own fresh engine, one at a time.
inline std::vector<RequestOutput> run_alone(const std::vector<std::vector<int32_t>>& prompts,
                                            const std::vector<SamplingParams>& params,
                                            LoadedModel (*make_model)(),
                                            const EngineConfig& config) {
  std::vector<RequestOutput> outputs;
  LLM llm(make_model(), config);
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto one = llm.generate({prompts[i]}, {params.size() == 1 ? params[0] : params[i]});
    outputs.push_back(std::move(one[0]));
  }
  return outputs;
}

}  // namespace tern::testing
