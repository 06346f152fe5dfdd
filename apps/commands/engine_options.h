// The engine's flags (vLLM's names), shared by `tern generate` and `tern serve`.
#pragma once

#include <string>

#include "commands/speculative_options.h"
#include "tern/engine/engine_config.h"

namespace CLI {
class App;
}

namespace tern::cli {

// --kv-cache-dtype into `kv_cache_dtype` (parse it with parse_kv_cache_dtype); for the
// commands that run a model without the engine (bench-model, perplexity).
void add_kv_cache_dtype_option(CLI::App* cmd, std::string& kv_cache_dtype);

struct EngineOptions {
  EngineConfig config;
  std::string kv_cache_memory;  // "4GiB"; parsed by engine_config()
  std::string kv_cache_dtype = "auto";
  double kv_cache_fraction = 0.0;
  double gpu_memory_utilization = 0.0;  // vLLM's (habit_flags.h); 0: not given
  bool no_prefix_caching = false;
  bool enable_prefix_caching = false;  // vLLM's flag for the default (habit_flags.h)
  int64_t ctx_size = 0;                // llama.cpp's -c, another name of --max-model-len
  bool no_chunked_prefill = false;
  std::string max_step_ms = "0";  // "auto" or ms; `tern serve` sets "auto" before add_to
  SpeculativeOptions speculative;

  // --block-size, --max-model-len, --kv-cache-memory, --kv-cache-fraction, --kv-cache-dtype,
  // --no-enable-prefix-caching, --max-num-seqs, --max-num-batched-tokens,
  // --max-step-ms, --no-enable-chunked-prefill, and the speculative-decoding flags.
  void add_to(CLI::App* cmd);
  // Throws tern::Error for a malformed size, KV dtype, step time or speculative config.
  EngineConfig engine_config() const;
};

}  // namespace tern::cli
