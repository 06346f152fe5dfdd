// The engine's settings, named after vLLM's flags, and how big its KV cache is.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "tern/backend/device.h"
#include "tern/blocks/kv_cache_config.h"
#include "tern/disagg/kv_transfer_config.h"
#include "tern/scheduler/scheduler.h"
#include "tern/spec_decode/speculator.h"

namespace tern {

struct EngineConfig {
  int block_size = 16;                      // --block-size
  int64_t max_model_len = 0;                // --max-model-len; 0: the model's, capped to the cache
  std::optional<uint64_t> kv_cache_memory;  // --kv-cache-memory, bytes
  std::optional<double> kv_cache_fraction;  // --kv-cache-fraction of available memory
  // --gpu-memory-utilization (vLLM's): on a device with memory of its own, the share of it the
  // instance may hold, weights and working memory included; the KV cache gets the rest. Unset:
  // 0.9 there; refused on the CPU.
  std::optional<double> gpu_memory_utilization;
  bool enable_prefix_caching = true;  // --no-enable-prefix-caching turns it off
  SchedulerConfig scheduler;          // --max-num-seqs, --max-num-batched-tokens, chunked prefill
  // --max-step-ms: chunked prefill's steps sized by time too: a step takes no more tokens than
  // the measured forward costs say fit in it (at least one per running sequence and one more).
  // 0: off; kAutoMaxStepMs (`auto`, `tern serve`'s default): see step_time_limit_ms.
  double max_step_ms = 0;
  uint64_t seed = 0;                      // --seed: seeds of requests that bring none
  SpeculativeConfig speculative;          // --speculative-config / --speculative-model
  KvDtype kv_cache_dtype = KvDtype::F16;  // --kv-cache-dtype (a draft's cache too)
  disagg::KvTransferConfig kv_transfer;   // --kv-transfer-config / --role: disaggregation
  // Told each start-up step that may take seconds as it begins (allocating and zeroing the KV
  // cache, timing the first steps): tern serve's log, so a start-up never sits silent. Empty:
  // nothing is told.
  std::function<void(const std::string&)> announce;
};

// The KV cache the engine will allocate, decided before it is.
struct KvCachePlan {
  int64_t num_blocks = 0;
  int64_t max_model_len = 0;
  int64_t bytes_per_token = 0;  // of the cache (and a draft's cache) as allocated
  std::string summary;          // one line for the log: blocks, tokens, bytes
  // Which limit max_model_len is, for context-length errors: "the model's", "--max-model-len",
  // or the KV cache's when it holds less than the model's context.
  std::string max_model_len_limit;
};

// Without --kv-cache-memory or --kv-cache-fraction: on a device with memory of its own,
// --gpu-memory-utilization of it less what tern holds there already (the weights, the
// activations), and when that flag is not given 0.9 of it, or less when max_num_seqs sequences
// of max_model_len tokens need less; on the CPU 4 GiB, or less when they need less. Throws
// tern::Error when the budget holds no block, or when an explicit max_model_len does not fit in the
// cache. `model_max_len`: the model's context. `draft_shape`: a draft model's cache, which has as
// many blocks as the target's (it follows the target's block ids), so a block costs both; nullptr
// without one. `device`: where the caches are (their alignment padding).
KvCachePlan plan_kv_cache(const KvCacheConfig& shape, const EngineConfig& config,
                          int64_t model_max_len, const Device& device,
                          const KvCacheConfig* draft_shape = nullptr);

// Refuses a --max-model-len longer than the model's context (`model_max_len`, 0: unknown), as
// vLLM does: positions past what the model was trained on give wrong outputs unless RoPE
// scaling is in use, which the environment variable TERN_ALLOW_LONG_MAX_MODEL_LEN=1 says.
void check_max_model_len(int64_t max_model_len, int64_t model_max_len);

// --max-step-ms auto: kAutoStepMs, or four one-token steps where those take longer. Under
// scripts/bench-interference.sh's heavier load (Qwen3-0.6B shape, Q4_0, Zen 5, 2 threads), 200
// ms cut the streams' worst gap from 2.30 s (chunked, 512 tokens a step) to 0.27 s for 1.11×
// the long prompts' TTFT; 300 ms gave 0.46 s and 1.11×. The four one-token steps keep a slow
// model's prompts in chunks worth their steps' fixed cost (its weights read once a step).
inline constexpr double kAutoMaxStepMs = -1;
inline constexpr double kAutoStepMs = 200;

// The time limit of a step in ms (0: none) that --max-step-ms `max_step_ms` sets, a step of
// one token taking `one_token_step_ms`.
double step_time_limit_ms(double max_step_ms, double one_token_step_ms);

// "4GiB", "512MiB", "1.5GB", "2e9", "1000000": bytes. Throws tern::Error on anything else.
uint64_t parse_byte_size(const std::string& text);

// MemAvailable of /proc/meminfo in bytes; tern::Error when it cannot be read.
uint64_t available_memory_bytes();

}  // namespace tern
