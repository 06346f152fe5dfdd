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

}  // namespace tern::cli
