// Prefill/decode disaggregation through two engines in one process, over UCX on loopback: a
// decode instance that pulls a prompt's KV gives what one instance gives alone, bit for bit;
// it pulls only what its prefix cache lacks; leases expire, serve once and free their blocks;
// a dead producer, a used or expired lease and another model fail the request clearly, or are
// prefilled here with kv_load_failure_policy recompute.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "backend/vulkan_test_util.h"
#include "engine/engine_test_util.h"
#include "tern/core/error.h"
#include "tern/engine/llm_engine.h"

namespace tern {
namespace {

using testing::greedy;
using testing::same_logprobs;
using testing::stories260k;

EngineConfig engine_with_role(disagg::KvRole role, double lease_seconds = 30.0) {
  EngineConfig c = testing::small_engine(64);
  c.kv_transfer.role = role;
  c.kv_transfer.port = 0;  // any free port: tests run side by side
  c.kv_transfer.lease_seconds = lease_seconds;
  return c;
}

// Steps `engine` until request `id` has finished; its last output (holding the whole
// completion, kv_transfer_params or error).
RequestOutput run_to_end(LLMEngine& engine, const std::string& id) {
  CompletionOutput whole;
  for (int guard = 0; guard < 2'000'000; ++guard) {
    for (RequestOutput& out : engine.step()) {
      if (out.request_id != id) continue;
      if (out.finished) return out;
    }
    if (!engine.has_work_to_step()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ADD_FAILURE() << "request " << id << " never finished";
  return {};
}

// The prefill instance's part: the prompt's first token and where its KV is held.
disagg::RemoteBlocks prefill_remotely(LLMEngine& producer, const std::string& id,
                                      const std::vector<int32_t>& prompt) {
  disagg::KvTransferParams kv;
  kv.do_remote_decode = true;
  producer.add_request(id, prompt, greedy(1), kv);
  RequestOutput out = run_to_end(producer, id);
  EXPECT_TRUE(out.kv_transfer_params.has_value()) << id;
  EXPECT_FALSE(out.error.has_value()) << id;
  return out.kv_transfer_params.value_or(disagg::RemoteBlocks{});
}

RequestOutput decode_remotely(LLMEngine& consumer, const std::string& id,
                              const std::vector<int32_t>& prompt, const SamplingParams& params,
                              const disagg::RemoteBlocks& where) {
  disagg::KvTransferParams kv;
  kv.remote_prefill = where;
  consumer.add_request(id, prompt, params, kv);
  return run_to_end(consumer, id);
}

RequestOutput alone(LLMEngine& engine, const std::string& id, const std::vector<int32_t>& prompt,
                    const SamplingParams& params) {
  engine.add_request(id, prompt, params);
  return run_to_end(engine, id);
}

void expect_same_completion(const RequestOutput& a, const RequestOutput& b,
                            const std::string& what) {
  ASSERT_EQ(a.outputs.size(), 1u) << what;
  ASSERT_EQ(b.outputs.size(), 1u) << what;
  EXPECT_FALSE(a.error.has_value()) << what << ": " << a.error.value_or("");
  EXPECT_EQ(a.outputs[0].token_ids, b.outputs[0].token_ids) << what;
  EXPECT_EQ(a.outputs[0].text, b.outputs[0].text) << what;
  EXPECT_TRUE(same_logprobs(a.outputs[0].logprobs, b.outputs[0].logprobs)) << what;
}

int64_t stories260k_block_bytes() {
  const LoadedModel m = stories260k();
  return Decoder(m.config, m.weights, find_device("cpu")).kv_cache_config(1).bytes_per_block();
}

std::vector<int32_t> prompt_of(int length, int32_t salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < length; ++i) p.push_back(3 + (i * 37 + salt * 11) % 500);
  return p;
}

// The last token of the producer's first output must be what the decode side computes too.
SamplingParams seeded(int max_tokens) {
  SamplingParams p = greedy(max_tokens);
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.seed = 1234;
  return p;
}

TEST(Disaggregation, DecodeInstanceGivesTheOutputsOfOneInstance) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM producer(stories260k(), engine_with_role(disagg::KvRole::kProducer));
  LLM consumer(stories260k(), engine_with_role(disagg::KvRole::kConsumer));
  LLM reference(stories260k(), testing::small_engine(64));
  ASSERT_NE(producer.engine().kv_connector()->port(), 0);
  EXPECT_EQ(producer.engine().kv_connector()->fingerprint(),
            consumer.engine().kv_connector()->fingerprint());

  int n = 0;
  for (int length : {1, 2, 16, 17, 32, 33, 150}) {
    for (const SamplingParams& params : {greedy(20), seeded(20)}) {
      const std::string id = "r" + std::to_string(n++);
      const std::vector<int32_t> prompt = prompt_of(length, n);
      const disagg::RemoteBlocks where = prefill_remotely(producer.engine(), id, prompt);
      EXPECT_EQ(static_cast<int64_t>(where.block_ids.size()), (length - 1 + 15) / 16);
      EXPECT_EQ(where.engine_id, producer.engine().kv_connector()->engine_id());
      if (length > 1) {
        EXPECT_GT(producer.engine().stats().kv_cache_usage, 0.0);  // held under the lease
      } else {
        EXPECT_TRUE(where.lease_id.empty());  // a one-token prompt has nothing to pull
      }
      const RequestOutput got = decode_remotely(consumer.engine(), id, prompt, params, where);
      expect_same_completion(got, alone(reference.engine(), id, prompt, params),
                             "prompt of " + std::to_string(length) + " tokens, " +
                                 (params.seed ? "seeded" : "greedy"));
      if (length > 1) {
        EXPECT_GE(got.metrics.kv_transfer_seconds, 0.0);
      }
    }
  }
  // Every lease was pulled; the next step of the producer frees its blocks.
  producer.engine().step();
  const EngineStats p = producer.engine().stats();
  EXPECT_EQ(p.kv.leases.held, 0);
  EXPECT_EQ(p.kv.leases.pulled, 12);  // the two one-token prompts had nothing to pull
  EXPECT_EQ(p.kv_cache_usage, 0.0);
  const EngineStats c = consumer.engine().stats();
  EXPECT_EQ(c.kv.pulls_ok, 12);
  EXPECT_EQ(c.kv.bytes_received, p.kv.bytes_sent);
  EXPECT_EQ(c.kv.blocks_received, p.kv.blocks_sent);
  EXPECT_EQ(c.kv_cache_usage, 0.0);
}

// A decode instance on a Vulkan device pulls what a CPU or a Vulkan instance prefilled, with
// an f16 and an int8 cache: the blocks have one layout on every backend, copied through host
// memory out of a device cache and into one. Its greedy ids are a Vulkan instance's alone (the
// logprobs differ within the backends' tolerance).
void expect_a_vulkan_decode_instance_pulls_from(bool producer_on_vulkan) {
  for (KvDtype dtype : {KvDtype::F16, KvDtype::Int8}) {
    SCOPED_TRACE(std::string(kv_dtype_name(dtype)));
    auto with = [dtype](EngineConfig c) {
      c.kv_cache_dtype = dtype;
      return c;
    };
    LLM producer(producer_on_vulkan ? testing::stories260k_on_vulkan() : stories260k(),
                 with(engine_with_role(disagg::KvRole::kProducer)));
    LLM consumer(testing::stories260k_on_vulkan(),
                 with(engine_with_role(disagg::KvRole::kConsumer)));
    LLM reference(testing::stories260k_on_vulkan(), with(testing::small_engine(64)));
    int n = 0;
    for (int length : {2, 17, 33, 150}) {
      const std::string id = "v" + std::to_string(n++);
      const std::vector<int32_t> prompt = prompt_of(length, n);
      const disagg::RemoteBlocks where = prefill_remotely(producer.engine(), id, prompt);
      const RequestOutput got = decode_remotely(consumer.engine(), id, prompt, greedy(20), where);
      const RequestOutput ref = alone(reference.engine(), id, prompt, greedy(20));
      ASSERT_EQ(got.outputs.size(), 1u);
      EXPECT_FALSE(got.error.has_value()) << got.error.value_or("");
      EXPECT_EQ(got.outputs[0].token_ids, ref.outputs[0].token_ids) << length << " tokens";
    }
    EXPECT_EQ(consumer.engine().stats().kv.pulls_ok, 4);
  }
}

TEST(Disaggregation, AVulkanDecodeInstancePullsFromACpuPrefill) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  expect_a_vulkan_decode_instance_pulls_from(/*producer_on_vulkan=*/false);
}

// The producer's blocks leave the device through host memory too: a Vulkan prefill, a Vulkan
// decode, the greedy ids of one Vulkan instance.
TEST(Disaggregation, AVulkanDecodeInstancePullsFromAVulkanPrefill) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  expect_a_vulkan_decode_instance_pulls_from(/*producer_on_vulkan=*/true);
}

TEST(Disaggregation, PullsOnlyWhatThePrefixCacheLacks) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM producer(stories260k(), engine_with_role(disagg::KvRole::kProducer));
  LLM consumer(stories260k(), engine_with_role(disagg::KvRole::kConsumer));
  LLM reference(stories260k(), testing::small_engine(64));
  const std::vector<int32_t> first = prompt_of(70, 1);  // blocks 0-3 full, a partial block 4
  std::vector<int32_t> second(first.begin(), first.begin() + 48);  // shares blocks 0-2
  for (int i = 0; i < 30; ++i) second.push_back(400 + i);

  const RequestOutput a = decode_remotely(consumer.engine(), "a", first, greedy(8),
                                          prefill_remotely(producer.engine(), "a", first));
  expect_same_completion(a, alone(reference.engine(), "a", first, greedy(8)), "first");
  const uint64_t block_bytes =
      static_cast<uint64_t>(consumer.engine().decoder().kv_cache_config(1).bytes_per_block());
  EXPECT_EQ(consumer.engine().stats().kv.bytes_received, 5 * block_bytes);

  const RequestOutput b = decode_remotely(consumer.engine(), "b", second, greedy(8),
                                          prefill_remotely(producer.engine(), "b", second));
  expect_same_completion(b, alone(reference.engine(), "b", second, greedy(8)), "second");
  // 78 tokens: blocks 0-2 were in the consumer's prefix cache; 3 and 4 (77 tokens) moved.
  EXPECT_EQ(consumer.engine().stats().kv.bytes_received, 7 * block_bytes);
  EXPECT_EQ(consumer.engine().stats().kv.blocks_received, 7u);
}

TEST(Disaggregation, ExpiredAndUsedLeasesAreRefused) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM producer(stories260k(), engine_with_role(disagg::KvRole::kProducer, /*lease_seconds=*/0.3));
  LLM consumer(stories260k(), engine_with_role(disagg::KvRole::kConsumer));
  const std::vector<int32_t> prompt = prompt_of(40, 2);

  const disagg::RemoteBlocks late = prefill_remotely(producer.engine(), "late", prompt);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  producer.engine().step();  // frees what expired
  EXPECT_EQ(producer.engine().stats().kv.leases.expired, 1);
  EXPECT_EQ(producer.engine().stats().kv_cache_usage, 0.0);
  const RequestOutput refused = decode_remotely(consumer.engine(), "late", prompt, greedy(4), late);
  ASSERT_TRUE(refused.error.has_value());
  EXPECT_NE(refused.error->find("expired"), std::string::npos) << *refused.error;
  EXPECT_EQ(refused.outputs.at(0).finish_reason, "abort");
  EXPECT_EQ(consumer.engine().stats().kv_cache_usage, 0.0);

  // Served once: a second pull under the same lease is refused (the second prompt differs in
  // its last block, so the consumer's prefix cache cannot spare the pull).
  const disagg::RemoteBlocks once = prefill_remotely(producer.engine(), "once", prompt);
  EXPECT_FALSE(decode_remotely(consumer.engine(), "once", prompt, greedy(4), once).error);
  std::vector<int32_t> other = prompt;
  other[38] = 7;
  const RequestOutput again = decode_remotely(consumer.engine(), "again", other, greedy(4), once);
  ASSERT_TRUE(again.error.has_value());
  EXPECT_NE(again.error->find("already used"), std::string::npos) << *again.error;

  disagg::RemoteBlocks forged = once;
  forged.lease_id = "0123456789abcdef0123456789abcdef";
  const RequestOutput unknown =
      decode_remotely(consumer.engine(), "forged", other, greedy(4), forged);
  ASSERT_TRUE(unknown.error.has_value());
  EXPECT_NE(unknown.error->find("unknown lease"), std::string::npos) << *unknown.error;
  EXPECT_GE(producer.engine().stats().kv.pulls_refused, 3);
}

TEST(Disaggregation, DeadProducerFailsTheRequestOrItIsPrefilledHere) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::vector<int32_t> prompt = prompt_of(50, 3);
  disagg::RemoteBlocks where;
  {
    LLM producer(stories260k(), engine_with_role(disagg::KvRole::kProducer));
    where = prefill_remotely(producer.engine(), "p", prompt);
  }  // the prefill instance dies after answering, before the pull
  LLM failing(stories260k(), engine_with_role(disagg::KvRole::kConsumer));
  const RequestOutput failed = decode_remotely(failing.engine(), "p", prompt, greedy(6), where);
  ASSERT_TRUE(failed.error.has_value());
  EXPECT_NE(failed.error->find(where.host + ":" + std::to_string(where.port)), std::string::npos)
      << *failed.error;
  EXPECT_EQ(failing.engine().stats().kv_cache_usage, 0.0);
  EXPECT_EQ(failing.engine().stats().kv.pulls_failed, 1);

  EngineConfig recompute = engine_with_role(disagg::KvRole::kConsumer);
  recompute.kv_transfer.load_failure_policy = disagg::KvLoadFailurePolicy::kRecompute;
  LLM recovering(stories260k(), recompute);
  LLM reference(stories260k(), testing::small_engine(64));
  expect_same_completion(decode_remotely(recovering.engine(), "p", prompt, greedy(6), where),
                         alone(reference.engine(), "p", prompt, greedy(6)),
                         "recomputed after a failed pull");
}

TEST(Disaggregation, AnotherModelOrKvLayoutIsRefused) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM producer(stories260k(), engine_with_role(disagg::KvRole::kProducer));
  EngineConfig int8 = engine_with_role(disagg::KvRole::kConsumer);
  int8.kv_cache_dtype = KvDtype::Int8;
  LLM consumer(stories260k(), int8);
  EXPECT_NE(producer.engine().kv_connector()->fingerprint(),
            consumer.engine().kv_connector()->fingerprint());
  const std::vector<int32_t> prompt = prompt_of(30, 4);
  const RequestOutput out = decode_remotely(consumer.engine(), "x", prompt, greedy(4),
                                            prefill_remotely(producer.engine(), "x", prompt));
  ASSERT_TRUE(out.error.has_value());
  EXPECT_NE(out.error->find("fingerprint"), std::string::npos) << *out.error;
}

TEST(Disaggregation, AbortWhilePullingFreesTheBlocksWhenThePullEnds) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM producer(stories260k(), engine_with_role(disagg::KvRole::kProducer));
  LLM consumer(stories260k(), engine_with_role(disagg::KvRole::kConsumer));
  const std::vector<int32_t> prompt = prompt_of(300, 5);
  const disagg::RemoteBlocks where = prefill_remotely(producer.engine(), "a", prompt);
  disagg::KvTransferParams kv;
  kv.remote_prefill = where;
  consumer.engine().add_request("a", prompt, greedy(4), kv);
  consumer.engine().step();  // admits it: blocks allocated, the pull starts
  EXPECT_TRUE(consumer.engine().abort_request("a"));
  bool reported = false;
  for (int i = 0; i < 100000 && consumer.engine().has_pending_transfers(); ++i) {
    for (const RequestOutput& out : consumer.engine().step())
      reported = reported || (out.request_id == "a" && out.finished);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_TRUE(reported);
  EXPECT_FALSE(consumer.engine().has_pending_transfers());
  EXPECT_EQ(consumer.engine().stats().kv_cache_usage, 0.0);
}

// A pull that waits for blocks starts in the step that frees them, so an engine that sleeps
// until its connector wakes it (the server's engine thread) is woken by that pull's end.
TEST(Disaggregation, APullWaitingForBlocksStartsWhenTheyAreFreed) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM producer(stories260k(), engine_with_role(disagg::KvRole::kProducer));
  EngineConfig tiny = engine_with_role(disagg::KvRole::kConsumer);
  tiny.max_model_len = 160;
  const int64_t block_bytes = stories260k_block_bytes();
  tiny.kv_cache_memory = static_cast<uint64_t>(block_bytes) * 12 + 4096;
  LLM consumer(stories260k(), tiny);
  ASSERT_EQ(consumer.engine().stats().num_blocks, 12);
  std::atomic<int> wakeups{0};
  consumer.engine().set_transfer_wakeup([&] { ++wakeups; });

  const std::vector<int32_t> long_prompt = prompt_of(140, 6);
  consumer.engine().add_request("a", long_prompt, greedy(19));
  for (int i = 0; i < 3; ++i) consumer.engine().step();  // "a" holds 9 of the 12 blocks
  const std::vector<int32_t> prompt = prompt_of(60, 7);  // its pull needs 4
  const disagg::RemoteBlocks where = prefill_remotely(producer.engine(), "b", prompt);
  disagg::KvTransferParams kv;
  kv.remote_prefill = where;
  consumer.engine().add_request("b", prompt, greedy(4), kv);
  bool a_done = false;
  while (!a_done)
    for (const RequestOutput& out : consumer.engine().step())
      a_done |= out.request_id == "a" && out.finished;
  EXPECT_EQ(wakeups.load(), 0);  // "b" could not start before
  for (int i = 0; i < 10000 && wakeups.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(wakeups.load(), 1) << "the waiting pull did not start when its blocks were freed";
  EXPECT_FALSE(run_to_end(consumer.engine(), "b").error.has_value());
}

TEST(Disaggregation, RequestsTheRoleCannotServeAreRefused) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM plain(stories260k(), testing::small_engine(64));
  LLM consumer(stories260k(), engine_with_role(disagg::KvRole::kConsumer));
  LLM producer(stories260k(), engine_with_role(disagg::KvRole::kProducer));
  disagg::KvTransferParams decode_later;
  decode_later.do_remote_decode = true;
  EXPECT_THROW(plain.engine().add_request("a", {5, 6, 7}, greedy(1), decode_later), Error);
  EXPECT_THROW(consumer.engine().add_request("a", {5, 6, 7}, greedy(1), decode_later), Error);
  SamplingParams two = greedy(1);
  two.n = 2;
  EXPECT_THROW(producer.engine().add_request("a", {5, 6, 7}, two, decode_later), Error);

  disagg::KvTransferParams pull;
  pull.remote_prefill = disagg::RemoteBlocks{"e", "127.0.0.1", 1, "lease", {0}, 0};
  EXPECT_THROW(producer.engine().add_request("b", prompt_of(40, 1), greedy(1), pull), Error);
  // 40 tokens need 3 blocks of 16 (39 pulled); one is too few.
  try {
    consumer.engine().add_request("b", prompt_of(40, 1), greedy(1), pull);
    ADD_FAILURE() << "accepted too few remote blocks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs 3"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(consumer.engine().has_unfinished_requests());
}

}  // namespace
}  // namespace tern
