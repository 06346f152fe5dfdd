// The flags every command that runs a model shares (--load-format, --dtype, --tokenizer,
// --revision, --threads, --seed), turned into tern::LoadOptions.
#pragma once

#include <cstdint>
#include <string>

#include "tern/models/model_loader.h"

namespace CLI {
class App;
}

namespace tern::cli {

struct ModelOptions {
  std::string model;
  std::string tokenizer;
  std::string revision = "main";  // of a Hugging Face model named ORG/NAME
  std::string load_format = "auto";
  std::string dtype = "auto";
  uint64_t weight_seed = 0;
  int threads = 0;  // 0: OpenMP's default (every core)

  // Adds --tokenizer, --revision, --load-format, --dtype, --weight-seed, --threads (not the
  // model itself).
  void add_to(CLI::App* cmd);
  // Checks the flags, sets the OpenMP thread count, and resolves Hugging Face names of the
  // model and tokenizer to local paths (downloading what the cache lacks). Throws tern::Error.
  LoadOptions load_options() const;
};

// --threads N of any command: tern::Error below 0; above the cores this process may run on
// (its affinity mask), one warning line on stderr, since the kernels' threads then wait on
// each other at every barrier and the model runs far slower than with one per core.
void check_threads(int threads);

}  // namespace tern::cli
