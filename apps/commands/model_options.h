// The flags every command that runs a model shares (--load-format, --dtype, --weight-type,
// --tokenizer, --revision, --threads, --device, --seed), turned into tern::LoadOptions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tern/models/model_loader.h"

namespace CLI {
class App;
}

namespace tern::cli {

// The model as a positional argument (vLLM's `serve MODEL`) or as --model / -m (what llama.cpp's
// tools take): either, not both.
struct ModelArgument {
  std::string positional;
  std::string flag;

  void add_to(CLI::App* cmd, const std::string& description);
  // The model given; throws tern::Error naming `usage` ("tern serve MODEL") when there is none,
  // and when the two name different models.
  std::string get(const std::string& usage) const;
};

struct ModelOptions {
  std::string model;
  std::string tokenizer;
  std::string revision = "main";  // of a Hugging Face model named ORG/NAME
  std::string load_format = "auto";
  std::string dtype = "auto";        // vLLM's: the type of the unquantized matrices
  std::string weight_type = "auto";  // tern's: every matrix requantized to it
  uint64_t weight_seed = 0;
  std::string quantization;  // vLLM's --quantization: "gptq", "awq", "mlx" ("" = any)
  int threads = 0;           // 0: OpenMP's default (every core)
  std::string device;        // --device ("": the default, find_device)

  // Adds --tokenizer, --revision, --load-format, --dtype, --weight-type, --weight-seed,
  // --quantization, --threads, --device (not the model itself).
  void add_to(CLI::App* cmd);
  // Checks the flags, sets the OpenMP thread count, and resolves Hugging Face names of the
  // model and tokenizer to local paths (downloading what the cache lacks). Throws tern::Error.
  LoadOptions load_options() const;
};

// load_model with a line on stderr before it starts ("loading FILE (1.2 GiB)"), so that a
// start-up of seconds (a big file read, repacked or requantized) is not silent.
LoadedModel load_model_announced(const LoadOptions& load);
// The same lines around any load: `what` ("", "draft ") names the model, `path` is what `load`
// reads (its size is said), `dummy` that it makes dummy weights.
LoadedModel announced_load(const std::string& what, const std::string& path, bool dummy,
                           const std::function<LoadedModel()>& load);

// --threads N of any command: tern::Error below 0; above the cores this process may run on
// (its affinity mask), one warning line on stderr, since the kernels' threads then wait on
// each other at every barrier and the model runs far slower than with one per core.
void check_threads(int threads);

}  // namespace tern::cli
