// What a model path on disk is, decided once for every command (generate, serve, inspect,
// plan, quantize…), so that each says the same thing about a file that is no model.
#pragma once

#include <string>

namespace tern {

enum class ModelPathKind {
  Gguf,         // a file that starts with GGUF's magic
  Folder,       // a Hugging Face folder: config.json, and safetensors weights or none
  Safetensors,  // a .safetensors file or model.safetensors.index.json, without its folder
  ConfigJson,   // a config.json alone (for --load-format dummy)
};

// Throws tern::Error naming the path when it does not exist or is none of the kinds: a file is
// GGUF by its magic, whatever its name; otherwise by its name (.safetensors, .json).
ModelPathKind model_path_kind(const std::string& path);

}  // namespace tern
