// KV cache sizing: from a byte budget to blocks, with the log line that says what fits.
#include "tern/engine/engine_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tern/core/error.h"

namespace tern {
namespace {

constexpr uint64_t kDefaultKvBytes = uint64_t{4} << 30;
// vLLM's default --gpu-memory-utilization.
constexpr double kDefaultGpuMemoryUtilization = 0.9;

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1u << 30));
  return buf;
}

}  // namespace

double step_time_limit_ms(double max_step_ms, double one_token_step_ms) {
  if (max_step_ms != kAutoMaxStepMs) return max_step_ms;
  return std::max(kAutoStepMs, 4 * one_token_step_ms);
}

uint64_t parse_byte_size(const std::string& text) {
  size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  unit.erase(
      std::remove_if(unit.begin(), unit.end(), [](unsigned char c) { return std::isspace(c); }),
      unit.end());
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "kib" || unit == "k")
    scale = 1024.0;
  else if (unit == "mib" || unit == "m")
    scale = 1024.0 * 1024;
  else if (unit == "gib" || unit == "g")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib" || unit == "t")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb")
    scale = 1e3;
  else if (unit == "mb")
    scale = 1e6;
  else if (unit == "gb")
    scale = 1e9;
  else if (unit == "tb")
    scale = 1e12;
  const double bytes = value * scale;
  if (end == 0 || scale == 0 || !std::isfinite(bytes) || bytes <= 0 || bytes > 1e18)
    throw Error("'" + text + "' is not a memory size (e.g. 4GiB, 512MiB, 2GB, 1000000)");
  return static_cast<uint64_t>(bytes);
}

uint64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  throw Error("/proc/meminfo: no MemAvailable line; give --kv-cache-memory instead");
}

void check_max_model_len(int64_t max_model_len, int64_t model_max_len) {
  if (model_max_len <= 0 || max_model_len <= model_max_len) return;
  const char* allow = std::getenv("TERN_ALLOW_LONG_MAX_MODEL_LEN");
  if (allow && std::string(allow) == "1") return;
  throw Error("--max-model-len " + std::to_string(max_model_len) +
              " is longer than the model's context of " + std::to_string(model_max_len) +
              " tokens; positions past it give wrong outputs unless the model uses RoPE "
              "scaling (then set TERN_ALLOW_LONG_MAX_MODEL_LEN=1)");
}

KvCachePlan plan_kv_cache(const KvCacheConfig& shape, const EngineConfig& config,
                          int64_t model_max_len, const Device& device,
                          const KvCacheConfig* draft_shape) {
  if (config.kv_cache_memory && config.kv_cache_fraction)
    throw Error("give --kv-cache-memory or --kv-cache-fraction, not both");
  if (config.max_model_len < 0)
    throw Error("max_model_len must be >= 0, got " + std::to_string(config.max_model_len));
  check_max_model_len(config.max_model_len, model_max_len);
  const int64_t wanted_len = config.max_model_len > 0 ? config.max_model_len : model_max_len;
  if (wanted_len < 1) throw Error("the model states no context length; give --max-model-len");

  const int64_t per_block =
      shape.bytes_per_block() + (draft_shape ? draft_shape->bytes_per_block() : 0);
  uint64_t budget = kDefaultKvBytes;
  std::string source = "default";
  const std::optional<DeviceMemory> own = device.own_memory();
  if (config.gpu_memory_utilization) {
    const double u = *config.gpu_memory_utilization;
    if (!own)
      throw Error(
          "--gpu-memory-utilization is the share of a GPU's memory (--device vulkan); "
          "on the " +
          std::string(device.name()) +
          ", --kv-cache-memory (e.g. 4GiB) or --kv-cache-fraction (of the free memory) "
          "sizes the KV cache");
    if (!(u > 0.0 && u <= 1.0))
      throw Error("--gpu-memory-utilization must be in (0, 1], got " + std::to_string(u));
    if (config.kv_cache_memory || config.kv_cache_fraction)
      throw Error(
          "give --gpu-memory-utilization or --kv-cache-memory / --kv-cache-fraction, "
          "not both");
  }
  // What every sequence at full length could use, in whole blocks (a 2-token run still needs
  // one block): the default never allocates more.
  const int64_t blocks_per_seq = (wanted_len + shape.block_size - 1) / shape.block_size;
  const uint64_t usable =
      static_cast<uint64_t>(static_cast<double>(per_block) * static_cast<double>(blocks_per_seq) *
                            config.scheduler.max_num_seqs) +
      (uint64_t{1} << 20);
  if (own && !config.kv_cache_memory && !config.kv_cache_fraction) {
    const double u = config.gpu_memory_utilization.value_or(kDefaultGpuMemoryUtilization);
    const double share = u * static_cast<double>(own->total);
    budget =
        share > static_cast<double>(own->in_use) ? static_cast<uint64_t>(share) - own->in_use : 0;
    char what[160];
    std::snprintf(what, sizeof what,
                  "--gpu-memory-utilization %.2f of %s's %s, less %s it holds already", u,
                  std::string(device.name()).c_str(), gib(static_cast<double>(own->total)).c_str(),
                  gib(static_cast<double>(own->in_use)).c_str());
    source = what;
    // Given, the share is the cache, as vLLM's; by default no more than the sequences can use.
    if (!config.gpu_memory_utilization && usable < budget) {
      budget = usable;
      source = "default: " + std::to_string(config.scheduler.max_num_seqs) + " sequences of " +
               std::to_string(wanted_len) + " tokens, within " + source;
    }
  } else if (config.kv_cache_memory) {
    budget = *config.kv_cache_memory;
    source = "--kv-cache-memory";
  } else if (config.kv_cache_fraction) {
    const double f = *config.kv_cache_fraction;
    if (!(f > 0.0 && f <= 1.0))
      throw Error("--kv-cache-fraction must be in (0, 1], got " + std::to_string(f));
    budget = static_cast<uint64_t>(f * static_cast<double>(available_memory_bytes()));
    source = "--kv-cache-fraction";
  } else {
    // No more than every sequence at full length could use, nor more than half the memory left
    // (the weights' pages and the system need the rest), nor 4 GiB (vLLM's CPU default,
    // VLLM_CPU_KVCACHE_SPACE).
    const uint64_t half_free = available_memory_bytes() / 2;
    if (usable <= std::min(budget, half_free)) {
      budget = usable;
      source = "default: " + std::to_string(config.scheduler.max_num_seqs) + " sequences of " +
               std::to_string(wanted_len) + " tokens";
    } else if (half_free < budget) {
      budget = half_free;
      source = "default: half of the free memory";
    } else {
      source = "default: 4 GiB at most";
    }
  }
  if (per_block <= 0) throw Error("kv cache: a block of this shape has no size");
  KvCachePlan plan;
  // Both caches (with a draft) in one budget, each with the device's alignment padding.
  const uint64_t padding = device.kv_cache_overhead_bytes(shape) +
                           (draft_shape ? device.kv_cache_overhead_bytes(*draft_shape) : 0);
  plan.num_blocks =
      budget <= padding
          ? 0
          : static_cast<int64_t>((budget - padding) / static_cast<uint64_t>(per_block));
  if (plan.num_blocks < 1)
    throw Error(source + ": " + std::to_string(budget) + " bytes hold no KV block of " +
                std::to_string(per_block) + " bytes");
  const int64_t cache_tokens = plan.num_blocks * shape.block_size;
  if (config.max_model_len > 0 && config.max_model_len > cache_tokens)
    throw Error("--max-model-len " + std::to_string(config.max_model_len) +
                " does not fit in the KV cache (" + std::to_string(cache_tokens) +
                " tokens); give a bigger --kv-cache-memory or a smaller --max-model-len");
  plan.max_model_len = std::min(wanted_len, cache_tokens);
  if (config.max_model_len > 0)
    plan.max_model_len_limit = "set by --max-model-len";
  else if (cache_tokens < wanted_len)
    plan.max_model_len_limit = "what the KV cache holds (" + source + "; the model's is " +
                               std::to_string(wanted_len) + ")";
  else
    plan.max_model_len_limit = "the model's";
  plan.bytes_per_token = per_block / shape.block_size;
  plan.summary =
      "KV cache (" + std::string(kv_dtype_name(shape.dtype)) +
      "): " + std::to_string(plan.num_blocks) + " blocks of " + std::to_string(shape.block_size) +
      " tokens = " + std::to_string(cache_tokens) + " tokens, " +
      gib(static_cast<double>(plan.num_blocks * per_block)) + " (" +
      std::to_string(per_block / shape.block_size) + " bytes per token" +
      (draft_shape ? ", " + std::to_string(draft_shape->bytes_per_token()) + " of them the draft's"
                   : "") +
      ", " + source + "); max_model_len " + std::to_string(plan.max_model_len);
  return plan;
}

}  // namespace tern
