#include "commands/engine_options.h"

#include <CLI/CLI.hpp>
#include <exception>
#include <string>

#include "commands/habit_flags.h"
#include "tern/core/error.h"

namespace tern::cli {

void add_kv_cache_dtype_option(CLI::App* cmd, std::string& kv_cache_dtype) {
  cmd->add_option("--kv-cache-dtype", kv_cache_dtype,
                  "KV cache element type: " + std::string(kv_cache_dtype_choices()) +
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
  cmd->add_option("--max-step-ms", max_step_ms,
                  "Size chunked prefill's steps by time too: no more prompt tokens than the "
                  "measured step costs say fit in this many ms, so that a long prompt's chunks "
                  "do not stall the streams decoding beside it (auto: 200 ms, or four one-token "
                  "steps where those take longer; 0: off)")
      ->capture_default_str();
  cmd->add_flag("--no-enable-chunked-prefill", no_chunked_prefill,
                "Prefill prompts whole (to measure what chunking does)");
  speculative.add_to(cmd);
  add_engine_habit_flags(cmd, *this);
}

namespace {

// "auto" (off under whole prefill, which it could not act on), or milliseconds >= 0.
double parse_max_step_ms(const std::string& text, bool whole_prefill) {
  if (text == "auto") return whole_prefill ? 0 : kAutoMaxStepMs;
  size_t end = 0;
  double ms = -1;
  try {
    ms = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  if (end == 0 || end != text.size() || !(ms >= 0))
    throw Error("--max-step-ms must be auto or a number of ms >= 0, got '" + text + "'");
  return ms;
}

}  // namespace

EngineConfig EngineOptions::engine_config() const {
  EngineConfig c = config;
  if (!kv_cache_memory.empty()) c.kv_cache_memory = parse_byte_size(kv_cache_memory);
  if (kv_cache_fraction != 0.0) c.kv_cache_fraction = kv_cache_fraction;
  if (gpu_memory_utilization != 0.0) c.gpu_memory_utilization = gpu_memory_utilization;
  c.kv_cache_dtype = parse_kv_cache_dtype(kv_cache_dtype);
  if (enable_prefix_caching && no_prefix_caching)
    throw Error("give --enable-prefix-caching or --no-enable-prefix-caching, not both");
  c.enable_prefix_caching = !no_prefix_caching;
  if (ctx_size != 0) {
    if (c.max_model_len != 0 && c.max_model_len != ctx_size)
      throw Error("give the context length once: --max-model-len or llama.cpp's -c/--ctx-size");
    c.max_model_len = ctx_size;
  }
  c.scheduler.enable_chunked_prefill = !no_chunked_prefill;
  c.max_step_ms = parse_max_step_ms(max_step_ms, no_chunked_prefill);
  c.speculative = speculative.config();
  return c;
}

}  // namespace tern::cli
