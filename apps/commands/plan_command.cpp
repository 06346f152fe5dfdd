// `tern plan MODEL`: does a model fit, and how fast can it decode, from its header or config
// alone (no weights read or downloaded). The sums are in src/tern/plan/.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "commands/commands.h"
#include "commands/model_options.h"
#include "tern/backend/device.h"
#include "tern/blocks/kv_dtype.h"
#include "tern/core/error.h"
#include "tern/engine/engine_config.h"
#include "tern/plan/decode_ceiling.h"
#include "tern/plan/memory_bandwidth.h"
#include "tern/plan/plan.h"
#include "tern/plan/plan_report.h"
#include "tern/quant/quant_recipe.h"

namespace tern::cli {
namespace {

struct PlanFlags {
  ModelArgument model_argument;
  std::string model;
  std::string revision = "main";
  std::string weight_type = "auto";
  std::string kv_cache_dtype = "auto";
  int64_t max_model_len = 0;
  int64_t max_num_seqs = 1;
  int64_t max_num_batched_tokens = 512;
  int block_size = 16;
  std::string device;
  std::string device_memory;
  std::string bandwidth;
  int threads = 0;
  bool json = false;
};

void run(const PlanFlags& f) {
  check_threads(f.threads);
  plan::PlanOptions o;
  const Device& device = find_device(f.device);
  o.device = device.name();
  const std::optional<DeviceMemory> own = device.own_memory();
  o.recipe = parse_weight_recipe(f.weight_type);
  o.kv_cache_dtype = parse_kv_cache_dtype(f.kv_cache_dtype);
  o.max_model_len = f.max_model_len;
  o.max_num_seqs = f.max_num_seqs;
  o.max_num_batched_tokens = f.max_num_batched_tokens;
  o.block_size = f.block_size;
  if (!f.device_memory.empty()) {
    o.device_memory = parse_byte_size(f.device_memory);
    o.device_memory_source = "--device-memory";
  } else if (own) {
    o.device_memory = own->total;
    o.device_memory_source = "the memory heap of " + std::string(device.name());
  } else {
    o.device_memory = available_memory_bytes();
    o.device_memory_source = "MemAvailable of this machine";
  }
  const plan::PlanModel model = plan::open_plan_model(f.model, f.revision);
  if (!f.bandwidth.empty()) {
    o.bandwidth = plan::parse_bandwidth(f.bandwidth);
    o.bandwidth_source = "--bandwidth";
  } else if (const std::optional<double> measured = device.measure_bandwidth()) {
    o.bandwidth = *measured;
    o.bandwidth_source = "measured on " + std::string(device.name()) + " by a copy on the device";
  } else {
    // Measured only once the model is known to be readable: it takes a second or two.
    const plan::BandwidthMeasurement m = plan::measure_read_bandwidth(f.threads);
    o.bandwidth = m.bytes_per_s;
    o.bandwidth_source = "measured on this machine, " + std::to_string(m.threads) + " thread" +
                         (m.threads == 1 ? "" : "s");
  }
  const plan::Plan p = plan::make_plan(model, o);
  if (f.json)
    std::printf("%s\n", plan::plan_json(p).dump(2).c_str());
  else
    std::fputs(plan::format_plan(p).c_str(), stdout);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto flags = std::make_shared<PlanFlags>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Weights, KV cache, working memory and the decode ceiling of a model, from its GGUF header, "
      "Hugging Face folder, config.json or Hugging Face name (no weights are read or downloaded)");
  flags->model_argument.add_to(cmd, "GGUF file, Hugging Face folder, config.json, or ORG/NAME");
  cmd->add_option("--revision", flags->revision, "Branch, tag or commit of a Hugging Face model");
  cmd->add_option("--weight-type", flags->weight_type,
                  "Weight type the plan assumes (what --weight-type of a run would make): auto "
                  "(the file's; a config: its torch_dtype), "
                  "f32, f16, bf16, q8_0, "
                  "q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, mxfp4, "
                  "or llama.cpp's mixtures "
                  "q4_k_m, q4_k_s, q5_k_m, q5_k_s, q3_k_s, q3_k_m, q3_k_l, mxfp4_moe "
                  "(per-tensor types as tern quantize makes them)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype", flags->kv_cache_dtype,
                  "KV cache element type: " + std::string(kv_cache_dtype_choices()))
      ->capture_default_str();
  cmd->add_option("--max-model-len", flags->max_model_len,
                  "Context of each sequence (default: the model's)");
  cmd->add_option("--max-num-seqs", flags->max_num_seqs, "Sequences held at max-model-len at once")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", flags->max_num_batched_tokens,
                  "Tokens in one step at most (sizes the working memory)")
      ->capture_default_str();
  cmd->add_option("--block-size", flags->block_size, "Tokens per KV-cache block")
      ->capture_default_str();
  cmd->add_option("--device", flags->device,
                  "Whose weight layouts, buffers and cache padding to count: " + device_names() +
                      " (default: " + std::string(find_device("").name()) + ")");
  cmd->add_option("--device-memory", flags->device_memory,
                  "Memory to fit in, e.g. 24GiB (default: this machine's MemAvailable)");
  cmd->add_option("--bandwidth", flags->bandwidth,
                  "Memory bandwidth for the decode ceiling, e.g. 936GB/s (default: measured here "
                  "in about a second)");
  cmd->add_option("--threads,-t", flags->threads,
                  "Threads of the bandwidth measurement (0: all cores)");
  cmd->add_flag("--json", flags->json, "Print the plan as one JSON object");
  cmd->callback([flags] {
    flags->model = flags->model_argument.get("tern plan MODEL");
    run(*flags);
  });
}

}  // namespace tern::cli
