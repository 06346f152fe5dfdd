// What `tern plan MODEL` reads: a GGUF's header, a Hugging Face folder's config.json and
// safetensors headers, a config.json alone, or a Hugging Face name's config.json and file
// sizes. Never the weights themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tern/formats/model_config.h"
#include "tern/formats/tensor_info.h"

namespace tern::plan {

struct PlanModel {
  std::string name;    // the MODEL argument
  std::string format;  // "GGUF", "safetensors", "config.json", "Hugging Face config.json"
  ModelConfig config;
  // The file's tensors (data pointers cleared: only names, types, shapes and sizes are kept);
  // empty for a config alone.
  std::vector<TensorInfo> tensors;
  // A Hugging Face repository's *.safetensors bytes as its listing gives them (headers
  // included), to set beside the sizes computed from the config; nullopt otherwise.
  std::optional<uint64_t> repo_weight_bytes;
};

// `spec`: a .gguf file, a folder (config.json with model.safetensors or an index, or
// config.json alone), a config.json file, or a Hugging Face ORG/NAME at `revision`. A hub GGUF
// (ORG/NAME:QUANT, ORG/NAME/FILE.gguf) is planned from the cache only. Throws tern::Error.
PlanModel open_plan_model(const std::string& spec, const std::string& revision = "main");

}  // namespace tern::plan
