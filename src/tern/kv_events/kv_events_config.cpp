// KvEventsConfig from JSON, each key checked for its type and range; vLLM's defaults for the
// keys not given.
#include "tern/kv_events/kv_events_config.h"

#include <nlohmann/json.hpp>

#include "tern/core/error.h"

namespace tern::kv_events {
namespace {

using nlohmann::json;

std::string string_of(const json& v, const std::string& key) {
  if (!v.is_string()) throw Error("kv events config: '" + key + "' must be a string");
  return v.get<std::string>();
}

int64_t count_of(const json& v, const std::string& key, int64_t max) {
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > max)
    throw Error("kv events config: '" + key + "' must be an integer in [1, " + std::to_string(max) +
                "]");
  return v.get<int64_t>();
}

}  // namespace

KvEventsConfig parse_kv_events_config(std::string_view text) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(std::string("kv events config: not JSON: ") + e.what());
  }
  if (!body.is_object()) throw Error("kv events config: must be a JSON object");
  KvEventsConfig c;
  std::string publisher;
  for (const auto& [key, v] : body.items()) {
    if (key == "enable_kv_cache_events") {
      if (!v.is_boolean())
        throw Error("kv events config: 'enable_kv_cache_events' must be true or false");
      c.enabled = v.get<bool>();
    } else if (key == "publisher") {
      if (!v.is_null()) publisher = string_of(v, key);
      if (!publisher.empty() && publisher != "zmq" && publisher != "null")
        throw Error("kv events config: publisher \"" + publisher + "\" is not one of zmq, null");
    } else if (key == "endpoint") {
      c.endpoint = string_of(v, key);
      if (c.endpoint.empty()) throw Error("kv events config: 'endpoint' is empty");
    } else if (key == "replay_endpoint") {
      if (!v.is_null()) c.replay_endpoint = string_of(v, key);
    } else if (key == "buffer_steps") {
      c.buffer_steps = count_of(v, key, int64_t{1} << 24);
    } else if (key == "hwm") {
      c.hwm = count_of(v, key, INT32_MAX);
    } else if (key == "max_queue_size") {
      c.max_queue_size = count_of(v, key, int64_t{1} << 24);
    } else if (key == "topic") {
      c.topic = string_of(v, key);
    } else {
      throw Error("kv events config: '" + key +
                  "' is not supported (tern knows enable_kv_cache_events, publisher, endpoint, "
                  "replay_endpoint, buffer_steps, hwm, max_queue_size, topic)");
    }
  }
  // vLLM: the null publisher publishes nothing, whatever enable_kv_cache_events says.
  if (publisher == "null") c.enabled = false;
  return c;
}

}  // namespace tern::kv_events
