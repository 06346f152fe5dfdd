// The engine's KV cache events through the publisher, as a router receives them: a ZMQ SUB
// socket, each message's frames checked and its msgpack decoded (msgpack-c), the events
// applied to an index of its own. After a random workload that evicts, resets and aborts,
// that index holds exactly the blocks the engine's prefix cache holds.
#include <gtest/gtest.h>
#include <msgpack.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_test_util.h"
#include "tern/kv_events/zmq_event_publisher.h"

namespace tern::kv_events {
namespace {

using nlohmann::json;

json to_json(const msgpack_object& o) {
  switch (o.type) {
    case MSGPACK_OBJECT_NIL:
      return nullptr;
    case MSGPACK_OBJECT_BOOLEAN:
      return o.via.boolean;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
      return o.via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
      return o.via.i64;
    case MSGPACK_OBJECT_FLOAT64:
    case MSGPACK_OBJECT_FLOAT32:
      return o.via.f64;
    case MSGPACK_OBJECT_STR:
      return std::string(o.via.str.ptr, o.via.str.size);
    case MSGPACK_OBJECT_ARRAY: {
      json a = json::array();
      for (uint32_t i = 0; i < o.via.array.size; ++i) a.push_back(to_json(o.via.array.ptr[i]));
      return a;
    }
    default:
      ADD_FAILURE() << "unexpected msgpack type " << o.type;
      return nullptr;
  }
}

json decode(const std::string& payload) {
  msgpack_unpacked result;
  msgpack_unpacked_init(&result);
  size_t offset = 0;
  json out;
  if (msgpack_unpack_next(&result, payload.data(), payload.size(), &offset) ==
      MSGPACK_UNPACK_SUCCESS) {
    out = to_json(result.data);
    EXPECT_EQ(offset, payload.size()) << "bytes after the batch";
  } else {
    ADD_FAILURE() << "the payload is not msgpack";
  }
  msgpack_unpacked_destroy(&result);
  return out;
}

// A router's subscriber: messages in, frames checked, sequence numbers without gaps.
class Subscriber {
 public:
  Subscriber(const std::string& endpoint, const std::string& topic) : topic_(topic) {
    context_ = zmq_ctx_new();
    socket_ = zmq_socket(context_, ZMQ_SUB);
    EXPECT_EQ(zmq_connect(socket_, endpoint.c_str()), 0);
    EXPECT_EQ(zmq_setsockopt(socket_, ZMQ_SUBSCRIBE, "kv@", 3), 0);
    const int timeout_ms = 100;
    zmq_setsockopt(socket_, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
  }
  ~Subscriber() {
    zmq_close(socket_);
    zmq_ctx_term(context_);
  }

  // The next batch within 100 ms; null when none came.
  json next() {
    std::vector<std::string> frames;
    for (;;) {
      zmq_msg_t msg;
      zmq_msg_init(&msg);
      if (zmq_msg_recv(&msg, socket_, 0) < 0) {
        zmq_msg_close(&msg);
        EXPECT_TRUE(frames.empty()) << "a message cut short";
        return nullptr;
      }
      frames.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
      const bool more = zmq_msg_more(&msg);
      zmq_msg_close(&msg);
      if (!more) break;
    }
    EXPECT_EQ(frames.size(), 3u);
    if (frames.size() != 3) return nullptr;
    EXPECT_EQ(frames[0], topic_);
    EXPECT_EQ(frames[1].size(), 8u);
    uint64_t seq = 0;
    for (char c : frames[1]) seq = seq << 8 | static_cast<unsigned char>(c);
    if (expected_seq_ >= 0) {
      EXPECT_EQ(seq, static_cast<uint64_t>(expected_seq_)) << "a gap";
    }
    expected_seq_ = static_cast<int64_t>(seq) + 1;
    return decode(frames[2]);
  }

 private:
  std::string topic_;
  void* context_;
  void* socket_;
  int64_t expected_seq_ = -1;
};

struct IndexedBlock {
  uint64_t parent;  // 0: a prompt's first block
  std::vector<int32_t> tokens;
  bool operator==(const IndexedBlock&) const = default;
};

// A router's index of one instance's cache, kept by the events.
class BlockIndex {
 public:
  void apply(const json& batch) {
    ASSERT_TRUE(batch.is_array() && batch.size() == 3) << batch;
    EXPECT_TRUE(batch[0].is_number_float());
    EXPECT_EQ(batch[2], 0);  // data_parallel_rank
    for (const json& e : batch[1]) {
      ASSERT_TRUE(e.is_array() && !e.empty() && e[0].is_string()) << e;
      if (e[0] == "BlockStored") {
        ASSERT_EQ(e.size(), 8u) << e;
        const int64_t block_size = e[4];
        ASSERT_EQ(e[3].size(), e[1].size() * static_cast<size_t>(block_size)) << e;
        EXPECT_TRUE(e[5].is_null());
        EXPECT_EQ(e[6], "CPU");
        EXPECT_TRUE(e[7].is_null());
        uint64_t parent = e[2].is_null() ? 0 : e[2].get<uint64_t>();
        for (size_t i = 0; i < e[1].size(); ++i) {
          const uint64_t hash = e[1][i];
          EXPECT_FALSE(blocks_.count(hash)) << "stored twice: " << hash;
          std::vector<int32_t> tokens(e[3].begin() + static_cast<int64_t>(i) * block_size,
                                      e[3].begin() + static_cast<int64_t>(i + 1) * block_size);
          blocks_[hash] = {parent, std::move(tokens)};
          parent = hash;
          ++stored_;
        }
      } else if (e[0] == "BlockRemoved") {
        ASSERT_EQ(e.size(), 3u) << e;
        EXPECT_EQ(e[2], "CPU");
        for (const json& h : e[1]) {
          EXPECT_EQ(blocks_.erase(h.get<uint64_t>()), 1u) << "removed but never stored: " << h;
          ++removed_;
        }
      } else if (e[0] == "AllBlocksCleared") {
        EXPECT_EQ(e.size(), 1u);
        blocks_.clear();
        ++cleared_;
      } else {
        ADD_FAILURE() << "unknown event " << e;
      }
    }
  }
  const std::map<uint64_t, IndexedBlock>& blocks() const { return blocks_; }
  int stored_ = 0, removed_ = 0, cleared_ = 0;

 private:
  std::map<uint64_t, IndexedBlock> blocks_;
};

std::map<uint64_t, IndexedBlock> engine_cache(const LLMEngine& engine) {
  std::map<uint64_t, IndexedBlock> out;
  for (const BlockManager::CachedBlock& b : engine.cached_blocks())
    out[b.key] = {b.parent_key == BlockManager::kRootKey ? 0 : b.parent_key, b.tokens};
  return out;
}

TEST(KvEvents, ARoutersIndexMatchesTheEnginesPrefixCache) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  EngineConfig config = testing::small_engine(48);
  config.kv_cache_memory = 40 * 16 * 640;  // about 40 blocks of 640 bytes per token
  LLM llm(testing::stories260k(), config);
  LLMEngine& engine = llm.engine();
  ASSERT_LE(engine.stats().num_blocks, 40);
  engine.record_kv_events(true);

  KvEventsConfig events;
  events.enabled = true;
  events.endpoint = "ipc:///tmp/tern-kv-events-test-" + std::to_string(::getpid());
  events.topic = "kv@10.0.0.7@stories";
  ZmqEventPublisher publisher(events);
  Subscriber subscriber(events.endpoint, events.topic);
  // A SUB socket's subscription reaches the publisher some time after it connects: empty
  // batches go out until one arrives, and the index starts from there.
  json first = nullptr;
  for (int i = 0; i < 200 && first.is_null(); ++i) {
    publisher.publish({0.0, {}, 0});
    first = subscriber.next();
  }
  ASSERT_FALSE(first.is_null()) << "the subscriber never received a batch";
  while (!subscriber.next().is_null()) {
  }
  BlockIndex index;
  double last_ts = 0;
  auto deliver = [&] {
    std::vector<KvCacheEvent> taken = engine.take_kv_events();
    if (taken.empty()) return;
    publisher.publish({++last_ts, std::move(taken), 0});
    const json batch = subscriber.next();
    ASSERT_FALSE(batch.is_null()) << "a batch was lost";
    EXPECT_EQ(batch[0], last_ts);
    index.apply(batch);
  };

  // Waves of prompts, a quarter sharing a 40-token prefix; a tenth aborted after a step; a
  // reset of the cache when the engine is idle halfway.
  std::mt19937 rng(5);
  const auto prompts = testing::random_prompts(64, 70, 512, 9);
  int next_id = 0;
  for (int wave = 0; wave < 8; ++wave) {
    for (int i = 0; i < 8; ++i) {
      SamplingParams p = testing::greedy(1 + static_cast<int>(rng() % 24), 0);
      engine.add_request(std::to_string(next_id), prompts[static_cast<size_t>(next_id)], p);
      ++next_id;
    }
    for (int steps = 0; engine.has_unfinished_requests(); ++steps) {
      engine.step();
      deliver();
      if (steps == 1 && wave % 3 == 0) engine.abort_request(std::to_string(next_id - 1));
    }
    if (wave == 4) {
      ASSERT_TRUE(engine.reset_prefix_cache());
      deliver();
      EXPECT_TRUE(index.blocks().empty());
    }
    EXPECT_EQ(index.blocks(), engine_cache(engine)) << "after wave " << wave;
  }
  EXPECT_GT(index.removed_, 20) << "the workload should evict";
  EXPECT_GT(index.stored_, 60);
  EXPECT_EQ(index.cleared_, 1);
  EXPECT_EQ(publisher.num_dropped(), 0);
}

TEST(KvEvents, NoResetWhileRequestsHoldBlocks) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LLM llm(testing::stories260k(), testing::small_engine());
  LLMEngine& engine = llm.engine();
  engine.record_kv_events(true);
  engine.add_request("a", std::vector<int32_t>(40, 7), testing::greedy(8, 0));
  engine.step();
  EXPECT_FALSE(engine.reset_prefix_cache());
  const std::vector<KvCacheEvent> events = engine.take_kv_events();
  ASSERT_EQ(events.size(), 1u);  // the two full blocks of the prompt, one chain
  const auto& stored = std::get<BlockStored>(events[0]);
  EXPECT_EQ(stored.block_hashes.size(), 2u);
  EXPECT_FALSE(stored.parent_block_hash);
  EXPECT_EQ(stored.token_ids, std::vector<int32_t>(32, 7));
  while (engine.has_unfinished_requests()) engine.step();
  EXPECT_TRUE(engine.reset_prefix_cache());
  EXPECT_TRUE(engine.cached_blocks().empty());
}

}  // namespace
}  // namespace tern::kv_events
