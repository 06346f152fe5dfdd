// Writing weights whose layers' matrices are tern's affine groups (INT4_G*, INT8_G*) as a GPTQ,
// AWQ or MLX checkpoint folder, each packed as its writers lay it out (models/
// checkpoint_weights.h reads them back): config.json with the format's quantization record,
// model.safetensors (or shards and their index), GPTQ's quantize_config.json, and the source
// folder's tokenizer files. Matrices the format leaves float are F16 (torch_dtype float16, which
// vLLM's GPTQ and AWQ kernels compute in); norms and biases F32, so that the folder holds
// exactly the model tern quantized (engines cast them to their compute type).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tern/formats/checkpoint_quantization.h"
#include "tern/formats/model_config.h"
#include "tern/models/weight_loader.h"

namespace tern {

struct CheckpointFolder {
  // The format and settings. For MLX, modules left float are recorded as such on writing.
  CheckpointQuantization quantization;
  // The source's config.json text, extended with the quantization record; "" to write one from
  // the ModelConfig (a GGUF source).
  std::string config_json;
  std::string tokenizer_dir;  // whose tokenizer files are copied; "" for none
  uint64_t max_shard_bytes = uint64_t{4} << 30;
};

// The tokenizer and generation files of a Hugging Face folder that travel with its weights.
std::vector<std::string> tokenizer_files(const std::string& dir);

// Throws tern::Error naming the first linear module of `config` that `q` cannot hold: GPTQ and
// AWQ quantize every one, so each one's inputs must be whole groups and whole words of codes and
// its outputs whole words of zero points. (MLX leaves such a module float.) For a check before
// the quantization, which takes minutes, rather than after it.
void check_checkpoint_shapes(const ModelConfig& config, const CheckpointQuantization& q);

// Writes `dir` (created; earlier weight files in it removed). The layers' matrices must be the
// format's INT type with groups the format can store: GPTQ and AWQ an integer zero point
// (GPTQ v1: at least 1; sym: the middle code), MLX an f16 bias; act-order matrices only for
// GPTQ with desc_act. GPTQ and AWQ keep the embedding and the LM head float; MLX quantizes them
// too where they are of the INT type. Throws tern::Error naming the module otherwise.
// Returns the files written.
std::vector<std::string> save_quantized_checkpoint(const std::string& dir, const ModelWeights& w,
                                                   const ModelConfig& config,
                                                   const CheckpointFolder& folder);

}  // namespace tern
