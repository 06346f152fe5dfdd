// What --kv-events-config asks for, in vLLM's KVEventsConfig names: whether the prefix cache's
// events are published, over which ZMQ endpoint, under which topic, with how much kept for
// subscribers that ask for a replay.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tern::kv_events {

struct KvEventsConfig {
  bool enabled = false;                   // enable_kv_cache_events
  std::string endpoint = "tcp://*:5557";  // the PUB socket: bound when it has * or :: or is
                                          // ipc:// / inproc://, else connected (to a router's
                                          // socket that binds), as vLLM's publisher does
  std::string replay_endpoint;            // a ROUTER socket (always bound); "" = no replay
  int64_t buffer_steps = 10'000;          // batches kept for replay
  int64_t hwm = 100'000;                  // ZMQ's send high-water mark, in messages
  int64_t max_queue_size = 100'000;       // batches waiting for the publisher thread
  std::string topic;                      // llm-d's routers read kv@<pod>@<model>
};

// vLLM's --kv-events-config JSON object: enable_kv_cache_events, publisher ("zmq", or "null"
// for none), endpoint, replay_endpoint, buffer_steps, hwm, max_queue_size, topic. An unknown
// key, a wrong type or an out-of-range number is a tern::Error naming it.
KvEventsConfig parse_kv_events_config(std::string_view json);

}  // namespace tern::kv_events
