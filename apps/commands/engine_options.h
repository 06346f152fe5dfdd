// The engine's flags (vLLM's names), shared by `tern generate` and `tern serve`.
#pragma once

#include <string>

#include "commands/speculative_options.h"
#include "tern/engine/engine_config.h"

namespace CLI {
class App;
}

namespace tern::cli {

struct EngineOptions {
  EngineConfig config;
  std::string kv_cache_memory;  // "4GiB"; parsed by engine_config()
  double kv_cache_fraction = 0.0;
  bool no_prefix_caching = false;
  bool no_chunked_prefill = false;
  SpeculativeOptions speculative;

  // --block-size, --max-model-len, --kv-cache-memory, --kv-cache-fraction,
  // --no-enable-prefix-caching, --max-num-seqs, --max-num-batched-tokens,
  // --no-enable-chunked-prefill, and the speculative-decoding flags.
  void add_to(CLI::App* cmd);
  // Throws tern::Error for a malformed size or speculative config.
  EngineConfig engine_config() const;
};

}  // namespace tern::cli
