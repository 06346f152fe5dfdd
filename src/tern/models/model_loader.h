// Opening a model for the CLI and the engine: a GGUF file, a Hugging Face folder, or (with
// --load-format dummy) random weights of a config's shapes; plus its tokenizer.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tern/backend/device.h"
#include "tern/core/dtype.h"
#include "tern/formats/checkpoint_quantization.h"
#include "tern/formats/model_config.h"
#include "tern/models/language_model.h"
#include "tern/models/weight_loader.h"
#include "tern/quant/quant_recipe.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

enum class LoadFormat { Auto, Dummy };

struct LoadOptions {
  // A .gguf file; a folder with config.json + *.safetensors; for dummy also a folder with only
  // config.json, a config.json file, or a GGUF (its metadata gives the shapes).
  std::string model;
  std::string tokenizer;  // overrides the model's own tokenizer ("" = the model's, if any)
  LoadFormat format = LoadFormat::Auto;
  // --weight-type: for dummy weights, what they are made in (nullopt: `dtype`, else the
  // config's torch_dtype, else F32); for real weights, nullopt keeps the file's types and
  // anything else requantizes every matrix.
  std::optional<QuantRecipe> weight_recipe;
  // vLLM's --dtype, a float type: after `weight_recipe`, the matrices still unquantized (F32,
  // F16, BF16) become it; quantized ones keep their type (convert_float_matrices). nullopt:
  // as stored. Both given, a uniform float recipe must be this type (load_model throws).
  std::optional<DType> dtype;
  uint64_t seed = 0;  // dummy weights
  // vLLM's --quantization: the checkpoint must be quantized by this method (a folder's
  // config.json says how it is; nullopt: whatever it says, or nothing).
  std::optional<QuantMethod> quantization;
  // --device: what the model runs on (find_device; "" the default); its weights are laid out
  // for it at load.
  std::string device;
};

struct LoadedModel {
  ModelConfig config;
  ModelWeights weights;
  std::optional<Tokenizer> tokenizer;
  std::string description;  // one line: "qwen3 (dummy Q4_0)", "llama (GGUF, F32)", …
  // The device the weights were prepared for, which a Decoder of them runs on.
  const Device* device = nullptr;
};

// Throws tern::Error naming the path and what is wrong. A tokenizer is loaded when one is
// found (the GGUF's, the folder's, or --tokenizer); its absence is not an error here.
LoadedModel load_model(const LoadOptions& options);

// The model class of `model`'s architecture (the llama family's Decoder), on the device its
// weights were prepared for; `model` must outlive it. Throws tern::Error as Decoder does.
std::unique_ptr<LanguageModel> make_language_model(const LoadedModel& model);

// How the checkpoint folder `dir` is quantized (its config.json, or AutoGPTQ's
// quantize_config.json); nullopt when it is not. Throws tern::Error for a setting tern does not
// read, and when `wanted` (--quantization) is given and the checkpoint says otherwise.
std::optional<CheckpointQuantization> folder_quantization(
    const std::string& dir, std::optional<QuantMethod> wanted = std::nullopt);

// The matrix type of dummy weights under `--dtype auto` and no `--weight-type`: a config's
// torch_dtype ("bfloat16" → BF16, "float16" → F16, anything else F32).
DType torch_dtype_weight_type(const std::string& torch_dtype);

}  // namespace tern
