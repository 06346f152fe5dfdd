// ModelOptions: shared model flags of `generate` and `bench-model`.
#include "commands/model_options.h"

#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "tern/backend/device.h"
#include "tern/core/clock.h"
#include "tern/core/error.h"
#include "tern/hub/resolve_model.h"
#include "tern/models/model_path.h"
#include "tern/quant/quant_recipe.h"

namespace tern::cli {

void ModelArgument::add_to(CLI::App* cmd, const std::string& description) {
  cmd->add_option("model_tag", positional, description);
  cmd->add_option("--model,-m", flag, "The model, instead of the positional argument");
}

std::string ModelArgument::get(const std::string& usage) const {
  if (!positional.empty() && !flag.empty() && positional != flag)
    throw Error("give the model once: as the argument or as --model");
  if (positional.empty() && flag.empty()) throw Error("give a model: " + usage);
  return positional.empty() ? flag : positional;
}

void ModelOptions::add_to(CLI::App* cmd) {
  cmd->add_option("--tokenizer", tokenizer,
                  "Tokenizer (GGUF, HF folder, tokenizer.model, or a Hugging Face ORG/NAME) "
                  "instead of the model's own");
  cmd->add_option("--revision", revision,
                  "Branch, tag or commit of a Hugging Face model (ORG/NAME, ORG/NAME:QUANT)");
  cmd->add_option("--load-format", load_format,
                  "auto: read the weights; dummy: random weights of the config's shapes")
      ->check(CLI::IsMember({"auto", "dummy"}));
  cmd->add_option("--dtype", dtype,
                  "Compute type, vLLM's: auto (as stored; dummy: the config's torch_dtype), half, "
                  "float16, bfloat16, float, float32 (or f16, bf16, f32). Matrices stored "
                  "unquantized (F32/F16/BF16) become that type; quantized ones (Q4_0, Q4_K, "
                  "GPTQ groups, ...) keep theirs. tern's CPU kernels keep activations in f32 "
                  "whatever it is (each matmul reads its input in its weight type's dot format). "
                  "To requantize, --weight-type");
  cmd->add_option(
      "--weight-type", weight_type,
      "Weight type of every matrix: auto (the file's; dummy: --dtype's, or the config's "
      "torch_dtype), f32, f16, bf16, "
      "q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, mxfp4, "
      "int4_g32/64/128, "
      "int8_g32/64/128 (the int types are GPTQ's groups, s · (q − z)); or llama.cpp's mixtures "
      "q4_k_m, q4_k_s, q5_k_m, q5_k_s, q3_k_s, q3_k_m, q3_k_l, mxfp4_moe (per-tensor types as "
      "llama-quantize chooses them; --save-gguf "
      "writes them). Real weights are requantized. With --dtype, the matrices it leaves float "
      "(rows no block fits) then become --dtype's type");
  cmd->add_option("--weight-seed", weight_seed, "Seed of dummy weights");
  cmd->add_option("--quantization,-q", quantization,
                  "The method the checkpoint folder must be quantized by (vLLM's flag): gptq, "
                  "awq or mlx; without it, what its config.json says")
      ->check(CLI::IsMember({"gptq", "awq", "mlx"}));
  cmd->add_option("--threads,-t", threads, "Threads of the kernels (0: all cores)");
  cmd->add_option("--device", device,
                  "What runs the model: " + device_names() +
                      " (default: " + std::string(find_device("").name()) + ")");
}

LoadedModel announced_load(const std::string& what, const std::string& path, bool dummy,
                           const std::function<LoadedModel()>& load) {
  std::error_code ec;
  uint64_t bytes = 0;
  if (std::filesystem::is_regular_file(path, ec)) {
    bytes = std::filesystem::file_size(path, ec);
  } else {
    for (const auto& f : std::filesystem::directory_iterator(path, ec))
      if (f.is_regular_file(ec)) bytes += f.file_size(ec);
  }
  std::fprintf(stderr, "loading %s%s (%.1f MiB%s)\n", what.c_str(), path.c_str(),
               static_cast<double>(bytes) / (1 << 20), dummy ? ", dummy weights" : "");
  const auto start = std::chrono::steady_clock::now();
  LoadedModel model = load();
  // Reading, repacking (a GPTQ/AWQ/MLX checkpoint's groups) and packing for the kernels.
  std::fprintf(stderr, "loaded in %.2f s\n", seconds_since(start));
  return model;
}

LoadedModel load_model_announced(const LoadOptions& load) {
  model_path_kind(load.model);  // what is no model is said before "loading" is
  return announced_load("", load.model, load.format == LoadFormat::Dummy,
                        [&] { return load_model(load); });
}

void check_threads(int threads) {
  if (threads < 0) throw Error("--threads must be >= 0, got " + std::to_string(threads));
  const int cores = omp_get_num_procs();
  if (threads > cores)
    std::fprintf(stderr,
                 "warning: --threads %d is more than the %d cores this process may run on: the "
                 "threads will wait on each other and every step runs slower than with %d\n",
                 threads, cores, cores);
}

LoadOptions ModelOptions::load_options() const {
  check_threads(threads);
  if (threads > 0) omp_set_num_threads(threads);
  LoadOptions o;
  o.device = find_device(device).name();  // an unknown device fails before any download
  o.format = load_format == "dummy" ? LoadFormat::Dummy : LoadFormat::Auto;
  // Dummy weights need only the config, so a hub model's weights are not downloaded for them.
  o.model = hub::resolve_model(
      model,
      {revision, o.format == LoadFormat::Dummy ? hub::RepoFiles::NoWeights : hub::RepoFiles::All});
  o.tokenizer = tokenizer.empty()
                    ? tokenizer
                    : hub::resolve_model(tokenizer, {"main", hub::RepoFiles::Tokenizer});
  o.weight_recipe = parse_weight_recipe(weight_type);
  o.dtype = parse_float_dtype(dtype);
  o.seed = weight_seed;
  if (!quantization.empty()) o.quantization = quant_method_from_name(quantization);
  return o;
}

}  // namespace tern::cli
