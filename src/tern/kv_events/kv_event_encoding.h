// vLLM's wire form of a batch of KV cache events (what its ZmqEventPublisher sends as a
// message's last frame), in msgpack as msgspec writes array-like tagged structs:
//   [ts, [event, …], data_parallel_rank]
//   ["BlockStored", [hash, …], parent_hash | nil, [token, …], block_size, lora_id, medium,
//    lora_name]
//   ["BlockRemoved", [hash, …], medium]
//   ["AllBlocksCleared"]
// Hashes are unsigned 64-bit integers (vLLM's default, VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES);
// tern has no LoRA, so lora_id and lora_name are nil.
#pragma once

#include <string>
#include <vector>

#include "tern/kv_events/kv_cache_event.h"

namespace tern::kv_events {

struct KvEventBatch {
  double ts = 0.0;  // Unix seconds
  std::vector<KvCacheEvent> events;
  int data_parallel_rank = 0;
};

// The medium tern's blocks live in: host memory, vLLM's "CPU" tier.
inline constexpr const char* kMedium = "CPU";

std::string encode_kv_event_batch(const KvEventBatch& batch);

}  // namespace tern::kv_events
