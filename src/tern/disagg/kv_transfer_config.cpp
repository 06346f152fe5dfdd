// KvTransferConfig from JSON: the keys vLLM users write for a connector, each checked for its
// type; what tern cannot honour is refused by name rather than ignored.
#include "tern/disagg/kv_transfer_config.h"

#include <nlohmann/json.hpp>

#include "tern/core/error.h"

namespace tern::disagg {
namespace {

using nlohmann::json;

std::string string_of(const json& v, const std::string& key) {
  if (!v.is_string()) throw Error("kv transfer config: '" + key + "' must be a string");
  return v.get<std::string>();
}

int64_t integer_of(const json& v, const std::string& key) {
  if (!v.is_number_integer()) throw Error("kv transfer config: '" + key + "' must be an integer");
  return v.get<int64_t>();
}

KvRole role_of_vllm_name(const std::string& name) {
  if (name == "kv_producer") return KvRole::kProducer;
  if (name == "kv_consumer") return KvRole::kConsumer;
  if (name == "kv_both") return KvRole::kBoth;
  throw Error("kv transfer config: kv_role \"" + name +
              "\" is not one of kv_producer, kv_consumer, kv_both");
}

}  // namespace

KvRole parse_kv_role(std::string_view role) {
  if (role == "prefill") return KvRole::kProducer;
  if (role == "decode") return KvRole::kConsumer;
  if (role == "both") return KvRole::kBoth;
  throw Error("--role must be prefill, decode or both, got \"" + std::string(role) + "\"");
}

const char* kv_role_name(KvRole role) {
  switch (role) {
    case KvRole::kProducer:
      return "kv_producer";
    case KvRole::kConsumer:
      return "kv_consumer";
    case KvRole::kBoth:
      return "kv_both";
    case KvRole::kNone:
      break;
  }
  return "none";
}

KvTransferConfig parse_kv_transfer_config(std::string_view text) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(std::string("kv transfer config: not JSON: ") + e.what());
  }
  if (!body.is_object()) throw Error("kv transfer config: must be a JSON object");
  KvTransferConfig c;
  bool has_role = false;
  for (const auto& [key, v] : body.items()) {
    if (v.is_null()) continue;  // vLLM's "not given"
    if (key == "kv_connector") {
      c.connector = string_of(v, key);
      if (c.connector != "UcxConnector")
        throw Error("kv transfer config: kv_connector \"" + c.connector +
                    "\" is not supported (tern has \"UcxConnector\")");
    } else if (key == "kv_role") {
      c.role = role_of_vllm_name(string_of(v, key));
      has_role = true;
    } else if (key == "kv_ip") {
      c.ip = string_of(v, key);
      if (c.ip.empty()) throw Error("kv transfer config: 'kv_ip' is empty");
    } else if (key == "kv_port") {
      const int64_t port = integer_of(v, key);
      if (port < 0 || port > 65535)
        throw Error("kv transfer config: 'kv_port' must be in [0, 65535], got " +
                    std::to_string(port));
      c.port = static_cast<int>(port);
    } else if (key == "engine_id") {
      c.engine_id = string_of(v, key);
    } else if (key == "kv_load_failure_policy") {
      const std::string policy = string_of(v, key);
      if (policy == "fail") {
        c.load_failure_policy = KvLoadFailurePolicy::kFail;
      } else if (policy == "recompute") {
        c.load_failure_policy = KvLoadFailurePolicy::kRecompute;
      } else {
        throw Error(
            "kv transfer config: kv_load_failure_policy must be \"fail\" or "
            "\"recompute\", got \"" +
            policy + "\"");
      }
    } else if (key == "kv_buffer_device") {
      const std::string device = string_of(v, key);
      if (device != "cpu")
        throw Error("kv transfer config: kv_buffer_device \"" + device +
                    "\" is not supported (tern's KV cache lives in host memory: \"cpu\")");
    } else if (key == "kv_rank" || key == "kv_parallel_size") {
      const int64_t x = integer_of(v, key);
      if (key == "kv_rank" ? x != 0 : x != 1)
        throw Error("kv transfer config: '" + key + "' must be " + (key == "kv_rank" ? "0" : "1") +
                    " (tern runs one process per instance; the router pairs instances)");
    } else if (key == "kv_connector_extra_config") {
      if (!v.is_object() || !v.empty())
        throw Error(
            "kv transfer config: kv_connector_extra_config must be empty (the "
            "UcxConnector has no extra settings; UCX itself reads UCX_TLS etc.)");
    } else {
      throw Error("kv transfer config: '" + key +
                  "' is not supported (tern knows kv_connector, kv_role, kv_ip, kv_port, "
                  "engine_id, kv_load_failure_policy, kv_buffer_device, kv_rank, "
                  "kv_parallel_size, kv_connector_extra_config)");
    }
  }
  if (!has_role) throw Error("kv transfer config: kv_role is required");
  return c;
}

}  // namespace tern::disagg
