#include "commands/engine_options.h"

#include <CLI/CLI.hpp>

namespace tern::cli {

void add_kv_cache_dtype_option(CLI::App* cmd, std::string& kv_cache_dtype) {
  cmd->add_option("--kv-cache-dtype", kv_cache_dtype,
                  "KV cache element type: " + std::string(cpu::kv_cache_dtype_choices()) +
                      " (auto = f16; fp8 = fp8_e4m3; the 8-bit types keep a scale per token "
                      "and kv head and hold about twice the tokens)")
      ->capture_default_str();
}

void EngineOptions::add_to(CLI::App* cmd) {
  cmd->add_option("--block-size", config.block_size, "Tokens per KV-cache block")
      ->capture_default_str();
  cmd->add_option("--max-model-len", config.max_model_len,
                  "Longest sequence (prompt + output); default: the model's, capped to the cache");
  cmd->add_option(
      "--kv-cache-memory", kv_cache_memory,
      "KV cache size, e.g. 4GiB (default: 4 GiB or what max-num-seqs full sequences need)");
  cmd->add_option("--kv-cache-fraction", kv_cache_fraction,
                  "KV cache size as a fraction of available memory, e.g. 0.5");
  add_kv_cache_dtype_option(cmd, kv_cache_dtype);
  cmd->add_flag("--no-enable-prefix-caching", no_prefix_caching, "Turn prefix caching off");
  cmd->add_option("--max-num-seqs", config.scheduler.max_num_seqs, "Sequences in one step at most")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", config.scheduler.max_num_batched_tokens,
                  "Tokens in one step at most (the chunked-prefill budget)")
      ->capture_default_str();
  cmd->add_option("--max-step-ms", config.max_step_ms,
                  "Size each step by time too: no more prompt tokens than the measured step "
                  "costs say fit in this many ms, so that a long prompt's chunks do not stall the "
                  "streams decoding beside it (0: off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--no-enable-chunked-prefill", no_chunked_prefill,
                "Prefill prompts whole (to measure what chunking does)");
  speculative.add_to(cmd);
}

EngineConfig EngineOptions::engine_config() const {
  EngineConfig c = config;
  if (!kv_cache_memory.empty()) c.kv_cache_memory = parse_byte_size(kv_cache_memory);
  if (kv_cache_fraction != 0.0) c.kv_cache_fraction = kv_cache_fraction;
  c.kv_cache_dtype = cpu::parse_kv_cache_dtype(kv_cache_dtype);
  c.enable_prefix_caching = !no_prefix_caching;
  c.scheduler.enable_chunked_prefill = !no_chunked_prefill;
  c.speculative = speculative.config();
  return c;
}

}  // namespace tern::cli
