// What --kv-transfer-config (vLLM's KVTransferConfig names) and --role ask of an instance:
// whether it prefills for others (producer), decodes what others prefilled (consumer) or
// both, where its transfer side listens, and what a decode does when the KV cannot be had.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tern::disagg {

enum class KvRole { kNone, kProducer, kConsumer, kBoth };

// What a consumer does when the pull of a request's KV fails (the producer died, the lease
// expired): fail that request (a 5xx naming the cause), or prefill it here instead.
enum class KvLoadFailurePolicy { kFail, kRecompute };

struct KvTransferConfig {
  KvRole role = KvRole::kNone;
  std::string connector = "UcxConnector";
  std::string ip = "127.0.0.1";  // kv_ip: the transfer side binds here (loopback by default)
  int port = 14579;              // kv_port: where it listens (vLLM's default); 0: any free port
  std::string engine_id;         // "" = one made up at start
  KvLoadFailurePolicy load_failure_policy = KvLoadFailurePolicy::kFail;
  double lease_seconds = 30.0;  // --kv-lease-seconds: how long prefilled blocks wait for a pull

  bool enabled() const { return role != KvRole::kNone; }
  bool produces() const { return role == KvRole::kProducer || role == KvRole::kBoth; }
  bool consumes() const { return role == KvRole::kConsumer || role == KvRole::kBoth; }
};

// vLLM's --kv-transfer-config JSON object. An unknown key, a key of the wrong type, or a value
// tern does not act on (another connector, a GPU buffer device, tensor-parallel ranks) is a
// tern::Error naming it.
KvTransferConfig parse_kv_transfer_config(std::string_view json);

// --role prefill | decode | both (kv_producer, kv_consumer, kv_both); tern::Error otherwise.
KvRole parse_kv_role(std::string_view role);

// "kv_producer", "kv_consumer", "kv_both" (or "none").
const char* kv_role_name(KvRole role);

}  // namespace tern::disagg
