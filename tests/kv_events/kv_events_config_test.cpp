// --kv-events-config: vLLM's keys and defaults, and a clear refusal of anything else.
#include "tern/kv_events/kv_events_config.h"

#include <gtest/gtest.h>

#include "tern/core/error.h"

namespace tern::kv_events {
namespace {

TEST(KvEventsConfig, VllmsKeysAndDefaults) {
  const KvEventsConfig d = parse_kv_events_config("{}");
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.endpoint, "tcp://*:5557");
  EXPECT_EQ(d.replay_endpoint, "");
  EXPECT_EQ(d.buffer_steps, 10000);
  EXPECT_EQ(d.hwm, 100000);
  EXPECT_EQ(d.max_queue_size, 100000);
  EXPECT_EQ(d.topic, "");

  const KvEventsConfig c = parse_kv_events_config(
      R"({"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://epp:5557",
          "replay_endpoint": "tcp://*:5558", "buffer_steps": 7, "hwm": 9, "max_queue_size": 11,
          "topic": "kv@10.0.0.3@Qwen/Qwen3-0.6B"})");
  EXPECT_TRUE(c.enabled);
  EXPECT_EQ(c.endpoint, "tcp://epp:5557");
  EXPECT_EQ(c.replay_endpoint, "tcp://*:5558");
  EXPECT_EQ(c.buffer_steps, 7);
  EXPECT_EQ(c.hwm, 9);
  EXPECT_EQ(c.max_queue_size, 11);
  EXPECT_EQ(c.topic, "kv@10.0.0.3@Qwen/Qwen3-0.6B");

  // vLLM's null publisher publishes nothing; a null replay endpoint is none.
  EXPECT_FALSE(
      parse_kv_events_config(R"({"enable_kv_cache_events": true, "publisher": "null"})").enabled);
  EXPECT_EQ(parse_kv_events_config(R"({"replay_endpoint": null})").replay_endpoint, "");
}

TEST(KvEventsConfig, RefusesWhatItCannotActOn) {
  const std::pair<const char*, const char*> cases[] = {
      {"not json", "not JSON"},
      {"[1]", "must be a JSON object"},
      {R"({"enable_kv_cache_events": 1})", "'enable_kv_cache_events' must be true or false"},
      {R"({"publisher": "kafka"})", "publisher \"kafka\" is not one of zmq, null"},
      {R"({"endpoint": ""})", "'endpoint' is empty"},
      {R"({"endpoint": 5557})", "'endpoint' must be a string"},
      {R"({"buffer_steps": 0})", "'buffer_steps' must be an integer in [1, "},
      {R"({"hwm": 1.5})", "'hwm' must be an integer"},
      {R"({"max_queue_size": -3})", "'max_queue_size' must be an integer"},
      {R"({"topic": null})", "'topic' must be a string"},
      {R"({"enable_kv_cache_event": true})",
       "'enable_kv_cache_event' is not supported (tern knows enable_kv_cache_events"},
  };
  for (const auto& [json, message] : cases) {
    try {
      parse_kv_events_config(json);
      ADD_FAILURE() << json << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << json << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace tern::kv_events
