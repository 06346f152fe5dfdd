// How a Hugging Face checkpoint's matrices are quantized, as the tools that wrote it say:
// GPTQ (AutoGPTQ, GPTQModel, llm-compressor's GPTQ export) and AWQ (AutoAWQ) in config.json's
// `quantization_config` (older AutoGPTQ checkpoints: quantize_config.json), MLX (mlx-lm) in
// config.json's `quantization`. Every setting tern cannot load exactly is refused here, naming
// the field and its value; the tensors' own shapes are checked against it at load
// (models/checkpoint_weights.h).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "tern/core/dtype.h"

namespace tern {

enum class QuantMethod { Gptq, Awq, Mlx };
std::string_view quant_method_name(QuantMethod method);  // "gptq", "awq", "mlx"
// vLLM's --quantization values tern reads ("gptq", "awq", "mlx"); nullopt for anything else.
std::optional<QuantMethod> quant_method_from_name(std::string_view name);

struct CheckpointQuantization {
  QuantMethod method = QuantMethod::Gptq;
  int bits = 4;          // 4 or 8 (AWQ: 4)
  int group_size = 128;  // 32, 64 or 128
  // GPTQ: act-order (`desc_act`): the checkpoint's g_idx gives each input its group, which
  // need not be a run of consecutive inputs.
  bool desc_act = false;
  bool sym = true;  // GPTQ: symmetric (informational: the zeros are stored either way)
  // GPTQ: qzeros hold zero − 1 (AutoGPTQ's format, GPTQModel's checkpoint_format "gptq"); false
  // for "gptq_v2", which stores the zero itself.
  bool zeros_minus_one = true;
  // MLX: modules quantized otherwise than the default (mlx-lm's mixed recipes), by module name
  // ("model.layers.0.mlp.down_proj"): their bits and group size, or nullopt when left float.
  std::map<std::string, std::optional<AffineIntFormat>, std::less<>> mlx_modules;

  // The bits and group size of module `name` (MLX's overrides; the default otherwise), or
  // nullopt when the checkpoint says it is not quantized.
  std::optional<AffineIntFormat> format_of(std::string_view module) const;
  // The tern type whose groups hold this format exactly (INT4_G128, …).
  DType dtype() const { return *affine_int_dtype(bits, group_size); }
};

// From the text of a config.json (and of quantize_config.json when the folder has one; "" when
// not); `name` prefixes errors. nullopt when the checkpoint is not quantized. Throws
// tern::Error naming the field and value for every setting tern does not load.
std::optional<CheckpointQuantization> parse_checkpoint_quantization(
    std::string_view config_json, std::string_view name, std::string_view quantize_config_json = {},
    std::string_view quantize_config_name = {});

// The text of `config_json` (a Hugging Face config.json) with `q` recorded as its writers
// record it: GPTQ and AWQ a `quantization_config` object (GPTQ's as AutoGPTQ saves it: bits,
// group_size, desc_act, sym, static_groups, lm_head, checkpoint_format; AWQ's as AutoAWQ:
// bits, group_size, zero_point, version "gemm"); MLX `quantization` {group_size, bits, and a
// module's own format or false} and the same again as `quantization_config`, as mlx-lm saves
// them. Any earlier record is replaced, and torch_dtype becomes `torch_dtype`. parse_checkpoint_
// quantization reads the result back as `q`.
std::string with_checkpoint_quantization(std::string_view config_json, std::string_view name,
                                         const CheckpointQuantization& q,
                                         std::string_view torch_dtype);
// GPTQ's quantize_config.json, which AutoGPTQ's loaders before transformers read.
std::string gptq_quantize_config_json(const CheckpointQuantization& q);

}  // namespace tern
