// The engine end to end: batch invariance (batched vs alone, chunked vs whole prefill, prefix
// cache hit vs miss), a tiny cache that forces preemption, n > 1, stop conditions, aborts and
// the errors a request gets at once.
#include "tern/engine/llm_engine.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine_test_util.h"
#include "tern/core/error.h"

namespace tern {
namespace {

using testing::expect_same_outputs;
using testing::greedy;
using testing::random_prompts;
using testing::run_alone;
using testing::small_engine;

// Mixed lengths, one batch: the same ids and logprobs as alone, with chunked and whole
// prefill, and with the prefix cache cold and warm.
void expect_batch_invariant(LoadedModel (*make_model)(), int count, int max_len, int max_tokens,
                            KvDtype kv_dtype = KvDtype::F16) {
  const int32_t vocab = static_cast<int32_t>(make_model().config.vocab_size);
  const auto prompts = random_prompts(count, max_len, vocab, 5);
  std::vector<SamplingParams> params;
  for (int i = 0; i < count; ++i) params.push_back(greedy(1 + (i * 7) % max_tokens));
  auto engine = [kv_dtype](int64_t budget, bool chunked = true, bool prefix = true) {
    EngineConfig c = small_engine(budget, chunked, prefix);
    c.kv_cache_dtype = kv_dtype;
    return c;
  };

  const auto alone = run_alone(prompts, params, make_model, engine(512, false, false));
  {
    LLM llm(make_model(), engine(48));  // chunked: prompts split over steps
    expect_same_outputs(llm.generate(prompts, params), alone,
                        "batched, chunked prefill, cold cache");
    const auto warm = llm.generate(prompts, params);
    EXPECT_GT(llm.engine().stats().prefix_cache_hits, 0);
    expect_same_outputs(warm, alone, "batched, prefix cache warm");
    EXPECT_EQ(llm.engine().stats().kv_cache_usage, 0.0);  // every block back
  }
  {
    LLM llm(make_model(), engine(512, /*chunked=*/false, /*prefix=*/false));
    expect_same_outputs(llm.generate(prompts, params), alone, "batched, whole prefill");
  }
}

TEST(LLMEngine, BatchInvariantStories260K) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  expect_batch_invariant(testing::stories260k, 64, 150, 24);
}

// --max-step-ms: with a limit no step fits, every step takes its floor (each running sequence's
// token and one more), so prompts are cut into many more steps; with one every step fits, the
// token budget alone decides. The outputs are the same either way.
TEST(LLMEngine, StepsSizedByTimeCutPromptsAndKeepTheOutputs) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const int32_t vocab = static_cast<int32_t>(testing::stories260k().config.vocab_size);
  const auto prompts = random_prompts(6, 120, vocab, 9);
  const std::vector<SamplingParams> params(prompts.size(), greedy(8));
  auto steps_and_outputs = [&](double max_step_ms) {
    EngineConfig c = small_engine(64);
    c.max_step_ms = max_step_ms;
    LLM llm(testing::stories260k(), c);
    auto outputs = llm.generate(prompts, params);
    return std::make_pair(llm.engine().stats().num_steps, std::move(outputs));
  };
  const auto [steps_off, off] = steps_and_outputs(0);
  const auto [steps_tight, tight] = steps_and_outputs(1e-9);
  const auto [steps_loose, loose] = steps_and_outputs(1e9);
  const auto [steps_auto, automatic] = steps_and_outputs(kAutoMaxStepMs);
  expect_same_outputs(tight, off, "steps at their floor");
  expect_same_outputs(loose, off, "steps within a loose limit");
  expect_same_outputs(automatic, off, "steps within --max-step-ms auto");
  EXPECT_GT(steps_tight, 3 * steps_off);
  EXPECT_EQ(steps_loose, steps_off);
}

// With a step time limit, steps are priced from the start (the engine times a forward of a
// prompt's chunk as it starts): under a limit no step fits, even the very first step of a lone
// prompt takes only its floor, where an unpriced first step would take the whole budget.
TEST(LLMEngine, TheFirstStepIsPricedBeforeAnyRequestRuns) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const int32_t vocab = static_cast<int32_t>(testing::stories260k().config.vocab_size);
  const auto prompts = random_prompts(1, 120, vocab, 5);
  EngineConfig c = small_engine(64);
  c.max_step_ms = 1e-9;
  LLM llm(testing::stories260k(), c);
  const int64_t prompt_tokens = static_cast<int64_t>(prompts[0].size());
  ASSERT_GT(prompt_tokens, 64 + 8);
  const auto tight = llm.generate(prompts, {greedy(1)});
  // At most two tokens a step (the floor: the running sequence's and one more) from the first
  // step on; a first step of 64 would leave the rest to far fewer steps.
  EXPECT_GE(llm.engine().stats().num_steps, prompt_tokens / 2);
  LLM unlimited(testing::stories260k(), small_engine(64));
  expect_same_outputs(tight, unlimited.generate(prompts, {greedy(1)}), "steps at their floor");
}

TEST(LLMEngine, BatchInvariantTinyQwen3) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  TERN_REQUIRE_FIXTURE("qwen-tokenizer/tokenizer_config.json");
  expect_batch_invariant(testing::tiny_qwen3, 16, 100, 12);
}

// stories260K with `config` (a roomy cache) against the same config in a cache of 12 blocks of
// 16 tokens of `bytes_per_token`: the tiny one preempts, gives the same outputs and frees every
// block.
void expect_tiny_cache_preempts_and_gives_the_same_outputs(
    const std::vector<std::vector<int32_t>>& prompts, const std::vector<SamplingParams>& params,
    const EngineConfig& config, uint64_t bytes_per_token, const char* what) {
  LLM big(testing::stories260k(), config);
  const auto reference = big.generate(prompts, params);
  EngineConfig tiny = config;
  tiny.max_model_len = 160;
  tiny.kv_cache_memory = bytes_per_token * 16 * 12 + 4096;
  LLM small(testing::stories260k(), tiny);
  ASSERT_LE(small.engine().stats().num_blocks, 13);
  const auto outputs = small.generate(prompts, params);
  EXPECT_GT(small.engine().stats().num_preemptions, 0);
  expect_same_outputs(outputs, reference, what);
  EXPECT_EQ(small.engine().stats().kv_cache_usage, 0.0);
}

// Each quantized KV dtype keeps the engine batch invariant (its own outputs, not f16's).
TEST(LLMEngine, BatchInvariantForEveryKvDtype) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  TERN_REQUIRE_FIXTURE("qwen-tokenizer/tokenizer_config.json");
  for (KvDtype dtype : {KvDtype::BF16, KvDtype::Int8, KvDtype::Fp8E4M3, KvDtype::Fp8E5M2}) {
    SCOPED_TRACE(std::string(kv_dtype_name(dtype)));
    expect_batch_invariant(testing::stories260k, 16, 100, 12, dtype);
    expect_batch_invariant(testing::tiny_qwen3, 8, 100, 8, dtype);
  }
}

// The same memory holds about twice the tokens at 8 bits, and preempting inside an int8 cache
// gives what a roomy int8 cache gives.
TEST(LLMEngine, Int8CacheHoldsTwiceTheTokensAndSurvivesPreemption) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  EngineConfig f16 = small_engine(64);
  f16.kv_cache_memory = uint64_t{1} << 20;
  EngineConfig int8 = f16;
  int8.kv_cache_dtype = KvDtype::Int8;
  const int64_t f16_blocks = LLM(testing::stories260k(), f16).engine().stats().num_blocks;
  const int64_t int8_blocks = LLM(testing::stories260k(), int8).engine().stats().num_blocks;
  // stories260K (5 layers, 4 kv heads, head_dim 8): 16 bytes of f16 per token and kv head
  // against 8 + a 2-byte scale, 640 against 400 bytes per token; 64-byte padding per array.
  EXPECT_EQ(f16_blocks, ((1 << 20) - 2 * 5 * 64) / (640 * 16));
  EXPECT_EQ(int8_blocks, ((1 << 20) - 4 * 5 * 64) / (400 * 16));

  int8.kv_cache_memory = uint64_t{64} << 20;
  expect_tiny_cache_preempts_and_gives_the_same_outputs(random_prompts(16, 100, 512, 9),
                                                        std::vector<SamplingParams>(16, greedy(30)),
                                                        int8, 400, "tiny int8 cache");
}

TEST(LLMEngine, TinyCachePreemptsAndStillGivesTheSameOutputs) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const auto prompts = random_prompts(24, 100, 512, 9);
  std::vector<SamplingParams> params;
  for (int i = 0; i < 24; ++i) {
    SamplingParams p = greedy(30);
    if (i % 2) {  // seeded sampling must also survive preemption and recompute
      p.temperature = 0.9f;
      p.seed = 100 + i;
    }
    params.push_back(p);
  }
  expect_tiny_cache_preempts_and_gives_the_same_outputs(prompts, params, small_engine(64), 640,
                                                        "tiny cache");
}

TEST(LLMEngine, RejectsWhatCanNeverRunAndKeepsServing) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  EngineConfig c = small_engine();
  c.max_model_len = 64;
  c.kv_cache_memory = 640 * 16 * 3 + 4096;              // 3 blocks: 48 tokens
  EXPECT_THROW(LLM(testing::stories260k(), c), Error);  // max_model_len does not fit
  c.max_model_len = 100000;
  c.kv_cache_memory.reset();
  try {
    LLM too_long(testing::stories260k(), c);
    FAIL() << "max_model_len 100000 on a model of 2048 tokens";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("longer than the model's context of 2048 tokens"),
              std::string::npos)
        << e.what();
  }
  c.kv_cache_memory = 640 * 16 * 3 + 4096;
  c.max_model_len = 0;
  LLM llm(testing::stories260k(), c);
  EXPECT_EQ(llm.engine().max_model_len(), 48);
  LLMEngine& engine = llm.engine();
  EXPECT_THROW(engine.add_request("long", std::vector<int32_t>(49, 5), greedy(1)), Error);
  EXPECT_THROW(engine.add_request("empty", {}, greedy(1)), Error);
  EXPECT_THROW(engine.add_request("vocab", {1, 512}, greedy(1)), Error);
  SamplingParams bad = greedy(1);
  bad.top_p = 0.0f;
  EXPECT_THROW(engine.add_request("bad", {1, 2}, bad), Error);
  engine.add_request("ok", {1, 2, 3}, greedy(100));
  EXPECT_THROW(engine.add_request("ok", {1, 2}, greedy(1)), Error);  // duplicate id
  std::vector<int32_t> ids;
  std::string finish;
  while (engine.has_unfinished_requests())
    for (auto& out : engine.step())
      for (auto& c2 : out.outputs)
        if (c2.finished()) {
          ids = c2.token_ids;
          finish = *c2.finish_reason;
        }
  EXPECT_EQ(finish, "length");  // capped by max_model_len: 3 + 45 = 48
  EXPECT_EQ(ids.size(), 45u);
}

TEST(LLMEngine, SeededCompletionsOfOneRequestMatchSeparateRequests) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM llm(testing::stories260k(), small_engine());
  const std::vector<int32_t> prompt =
      llm.tokenizer().encode("Once upon a time, a little");  // 7 tokens: the
  // last block is partial, so the completions copy it on write.
  SamplingParams p;
  p.temperature = 1.0f;
  p.max_tokens = 20;
  p.seed = 42;
  p.n = 3;
  const auto together = llm.generate({prompt}, {p});
  ASSERT_EQ(together[0].outputs.size(), 3u);
  p.n = 1;
  for (int i = 0; i < 3; ++i) {
    p.seed = 42 + i;
    const auto alone = llm.generate({prompt}, {p});
    EXPECT_EQ(together[0].outputs[static_cast<size_t>(i)].token_ids, alone[0].outputs[0].token_ids)
        << i;
    EXPECT_EQ(together[0].outputs[static_cast<size_t>(i)].index, i);
  }
  EXPECT_NE(together[0].outputs[0].token_ids, together[0].outputs[1].token_ids);
  EXPECT_EQ(llm.engine().stats().kv_cache_usage, 0.0);
}

TEST(LLMEngine, StopStringsStopIdsAndMinTokens) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM llm(testing::stories260k(), small_engine());
  const auto prompt = llm.tokenizer().encode("Once upon a time");
  const auto plain = llm.generate({prompt}, {greedy(40, 0)})[0].outputs[0];
  ASSERT_GT(plain.text.size(), 30u);

  // A stop string spanning tokens: the text ends right before it.
  const std::string stop = plain.text.substr(12, 9);
  SamplingParams s = greedy(40, 0);
  s.stop = {stop};
  const auto stopped = llm.generate({prompt}, {s})[0].outputs[0];
  EXPECT_EQ(stopped.text, plain.text.substr(0, plain.text.find(stop)));
  EXPECT_EQ(*stopped.finish_reason, "stop");
  EXPECT_EQ(std::get<std::string>(stopped.stop_reason), stop);
  s.include_stop_str_in_output = true;
  const auto with_stop = llm.generate({prompt}, {s})[0].outputs[0];
  EXPECT_EQ(with_stop.text, plain.text.substr(0, plain.text.find(stop) + stop.size()));

  // A stop token id: generation ends on it, the id kept in token_ids.
  const int32_t third = plain.token_ids[2];
  SamplingParams t = greedy(40, 0);
  t.stop_token_ids = {third};
  const auto by_id = llm.generate({prompt}, {t})[0].outputs[0];
  const size_t first_at = static_cast<size_t>(
      std::find(plain.token_ids.begin(), plain.token_ids.end(), third) - plain.token_ids.begin());
  EXPECT_EQ(by_id.token_ids.size(), first_at + 1);
  EXPECT_EQ(by_id.token_ids.back(), third);
  EXPECT_EQ(std::get<int32_t>(by_id.stop_reason), third);

  // min_tokens: that id cannot come before 10 tokens.
  t.min_tokens = 10;
  const auto late = llm.generate({prompt}, {t})[0].outputs[0];
  EXPECT_GE(late.token_ids.size(), 10u);
  for (size_t i = 0; i + 1 < std::min<size_t>(late.token_ids.size(), 10); ++i)
    EXPECT_NE(late.token_ids[i], third);

  // max_tokens: "length".
  const auto short_one = llm.generate({prompt}, {greedy(5, 0)})[0].outputs[0];
  EXPECT_EQ(short_one.token_ids.size(), 5u);
  EXPECT_EQ(*short_one.finish_reason, "length");
}

TEST(LLMEngine, PenaltiesChangeTheGreedyPathDeterministically) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM llm(testing::stories260k(), small_engine());
  const auto prompt = llm.tokenizer().encode("Once upon a time");
  const auto plain = llm.generate({prompt}, {greedy(60, 0)})[0].outputs[0];
  SamplingParams p = greedy(60, 0);
  p.frequency_penalty = 2.0f;
  const auto a = llm.generate({prompt}, {p})[0].outputs[0];
  const auto b = llm.generate({prompt}, {p})[0].outputs[0];
  EXPECT_EQ(a.token_ids, b.token_ids);
  EXPECT_NE(a.token_ids, plain.token_ids);
  auto max_count = [](const std::vector<int32_t>& ids) {
    int best = 0;
    for (int32_t id : ids)
      best = std::max<int>(best, static_cast<int>(std::count(ids.begin(), ids.end(), id)));
    return best;
  };
  EXPECT_LT(max_count(a.token_ids), max_count(plain.token_ids));
}

TEST(LLMEngine, AbortFreesTheBlocksAndReportsAbort) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM llm(testing::stories260k(), small_engine());
  LLMEngine& engine = llm.engine();
  engine.add_request("a", {1, 403, 407}, greedy(50));
  engine.add_request("b", {1, 403, 407, 261}, greedy(50));
  for (int i = 0; i < 3; ++i) engine.step();
  EXPECT_GT(engine.stats().kv_cache_usage, 0.0);
  EXPECT_TRUE(engine.abort_request("a"));
  EXPECT_FALSE(engine.abort_request("a"));
  EXPECT_FALSE(engine.abort_request("nobody"));
  bool saw_abort = false;
  while (engine.has_unfinished_requests())
    for (auto& out : engine.step())
      if (out.request_id == "a") {
        saw_abort = true;
        EXPECT_TRUE(out.finished);
        EXPECT_EQ(*out.outputs.at(0).finish_reason, "abort");
        EXPECT_EQ(out.outputs.at(0).token_ids.size(), 3u);
      }
  EXPECT_TRUE(saw_abort);
  EXPECT_EQ(engine.stats().kv_cache_usage, 0.0);
}

// --max-step-ms auto is 200 ms, or four one-token steps where those take longer; a number is
// itself.
TEST(EngineConfig, StepTimeLimits) {
  EXPECT_EQ(step_time_limit_ms(kAutoMaxStepMs, 10), 200);
  EXPECT_EQ(step_time_limit_ms(kAutoMaxStepMs, 120), 480);
  EXPECT_EQ(step_time_limit_ms(50, 120), 50);
  EXPECT_EQ(step_time_limit_ms(0, 120), 0);
}

TEST(EngineConfig, ParsesMemorySizes) {
  EXPECT_EQ(parse_byte_size("4GiB"), uint64_t{4} << 30);
  EXPECT_EQ(parse_byte_size("512 MiB"), uint64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("2GB"), uint64_t{2000000000});
  EXPECT_EQ(parse_byte_size("1000"), 1000u);
  EXPECT_EQ(parse_byte_size("1.5k"), 1536u);
  for (const char* bad : {"", "GiB", "-1GiB", "4 parsecs", "0", "nan"})
    EXPECT_THROW(parse_byte_size(bad), Error) << bad;
}

// The default budget is what max_num_seqs full sequences need, in whole blocks: a run of a
// couple of tokens still gets a block (it used to get a budget smaller than one block).
TEST(EngineConfig, DefaultKvBudgetIsWholeBlocks) {
  KvCacheConfig shape;
  shape.num_layers = 28, shape.n_kv_heads = 8, shape.head_dim = 128, shape.block_size = 16;
  EngineConfig config;
  config.scheduler.max_num_seqs = 1;
  config.max_model_len = 2;
  const KvCachePlan tiny = plan_kv_cache(shape, config, 40960, find_device("cpu"));
  EXPECT_GE(tiny.num_blocks, 1);
  EXPECT_EQ(tiny.max_model_len, 2);
  config.max_model_len = 0;
  config.scheduler.max_num_seqs = 4;
  const KvCachePlan full =
      plan_kv_cache(shape, config, 100, find_device("cpu"));  // 7 blocks per sequence
  EXPECT_GE(full.num_blocks, 4 * 7);
  EXPECT_EQ(full.max_model_len, 100);
  EXPECT_NE(full.summary.find("default: 4 sequences of 100 tokens"), std::string::npos)
      << full.summary;
  EXPECT_LT(full.num_blocks, 4 * 7 + 10);  // sized from what the model can use, not 4 GiB
  config.kv_cache_memory = uint64_t{1000};
  EXPECT_THROW(plan_kv_cache(shape, config, 100, find_device("cpu")),
               Error);  // an explicit budget below a block
}

// A model that could use more than there is gets 4 GiB at most, and never more than half the
// memory left: the log line says which bound it took.
TEST(EngineConfig, DefaultKvBudgetIsBoundedByFreeMemory) {
  KvCacheConfig shape;
  shape.num_layers = 28, shape.n_kv_heads = 8, shape.head_dim = 128, shape.block_size = 16;
  EngineConfig config;
  config.scheduler.max_num_seqs = 256;
  const KvCachePlan plan =
      plan_kv_cache(shape, config, 40960, find_device("cpu"));  // 1.4 TiB would be "usable"
  const uint64_t bytes = static_cast<uint64_t>(plan.num_blocks) * shape.bytes_per_block();
  EXPECT_LE(bytes, std::min(uint64_t{4} << 30, available_memory_bytes() / 2 + (1 << 20)));
  const bool bounded = plan.summary.find("default: 4 GiB at most") != std::string::npos ||
                       plan.summary.find("default: half of the free memory") != std::string::npos;
  EXPECT_TRUE(bounded) << plan.summary;
}

// A device with 1 GiB of its own, 100 MiB of it held (weights, activations).
class GpuLikeDevice final : public Device {
 public:
  std::string_view name() const override { return "gpu-like"; }
  void prepare_weights(ModelWeights&) const override {}
  std::unique_ptr<Backend> make_backend(const ModelConfig&, const ModelWeights&) const override {
    throw Error("no backend");
  }
  uint64_t kv_cache_overhead_bytes(const KvCacheConfig&) const override { return 0; }
  uint64_t prepared_copy_bytes(const MatrixShape&) const override { return 0; }
  std::optional<DeviceMemory> own_memory() const override {
    return DeviceMemory{uint64_t{1} << 30, uint64_t{100} << 20};
  }
  std::optional<double> measure_bandwidth() const override { return 100e9; }
  WorkingBytes working_bytes(const ModelConfig&, std::span<const std::vector<MatrixShape>>,
                             const MatrixShape&, int64_t, int64_t) const override {
    return {};
  }
};

// vLLM's --gpu-memory-utilization: on a device with memory of its own the cache is that share of
// it less what is held there (by default 0.9, or what the sequences can use when that is less);
// on the CPU the flag is refused with what sizes the cache there.
TEST(EngineConfig, GpuMemoryUtilizationSizesTheCacheFromTheDevicesMemory) {
  KvCacheConfig shape;
  shape.num_layers = 2, shape.n_kv_heads = 1, shape.head_dim = 64, shape.block_size = 16;
  const GpuLikeDevice gpu;
  EngineConfig config;
  auto blocks_of = [&](double share) {
    return static_cast<int64_t>((share * (uint64_t{1} << 30) - (uint64_t{100} << 20)) /
                                static_cast<double>(shape.bytes_per_block()));
  };
  config.scheduler.max_num_seqs = 100000;  // more than the memory holds
  const KvCachePlan by_default = plan_kv_cache(shape, config, 100, gpu);
  EXPECT_EQ(by_default.num_blocks, blocks_of(0.9));
  EXPECT_NE(by_default.summary.find("--gpu-memory-utilization 0.90 of gpu-like's 1.00 GiB, less"),
            std::string::npos)
      << by_default.summary;
  config.scheduler.max_num_seqs = 4;  // by default only what 4 sequences of 100 tokens use
  const KvCachePlan small = plan_kv_cache(shape, config, 100, gpu);
  EXPECT_LE(small.num_blocks, 4 * 7 + (int64_t{1} << 20) / shape.bytes_per_block());  // + 1 MiB
  EXPECT_NE(small.summary.find("default: 4 sequences of 100 tokens, within --gpu-memory"),
            std::string::npos)
      << small.summary;
  config.gpu_memory_utilization = 0.5;  // given: the whole share, as vLLM
  EXPECT_EQ(plan_kv_cache(shape, config, 100, gpu).num_blocks, blocks_of(0.5));
  config.gpu_memory_utilization = 0.05;  // less than is held already
  EXPECT_THROW(plan_kv_cache(shape, config, 100, gpu), Error);
  config.gpu_memory_utilization = 1.5;
  EXPECT_THROW(plan_kv_cache(shape, config, 100, gpu), Error);
  config.gpu_memory_utilization = 0.5;
  try {
    plan_kv_cache(shape, config, 100, find_device("cpu"));
    ADD_FAILURE() << "--gpu-memory-utilization was taken on the CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-cache-memory (e.g. 4GiB) or --kv-cache-fraction"),
              std::string::npos)
        << e.what();
  }
}

// Which limit max_model_len is, for the context-length errors: the model's, --max-model-len's,
// or the KV cache's when it holds less than the model's context.
TEST(EngineConfig, TheContextLimitSaysWhereItComesFrom) {
  KvCacheConfig shape;
  shape.num_layers = 2, shape.n_kv_heads = 1, shape.head_dim = 64, shape.block_size = 16;
  EngineConfig config;
  EXPECT_EQ(plan_kv_cache(shape, config, 100, find_device("cpu")).max_model_len_limit,
            "the model's");
  config.max_model_len = 64;
  EXPECT_EQ(plan_kv_cache(shape, config, 100, find_device("cpu")).max_model_len_limit,
            "set by --max-model-len");
  config.max_model_len = 0;
  config.kv_cache_memory = shape.bytes_per_block() * 4 + 4096;  // 64 tokens
  const KvCachePlan small = plan_kv_cache(shape, config, 100, find_device("cpu"));
  EXPECT_EQ(small.max_model_len, 64);
  EXPECT_EQ(small.max_model_len_limit,
            "what the KV cache holds (--kv-cache-memory; the model's is 100)");
}

}  // namespace
}  // namespace tern
