// `tern plan`'s weights: every tensor of a model with the type it has in its file, or the type
// `--weight-type` would give it (the QuantRecipe `tern quantize` and `--weight-type` use), and what
// a decode step reads of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tern/backend/device.h"
#include "tern/core/dtype.h"
#include "tern/formats/model_config.h"
#include "tern/formats/tensor_info.h"
#include "tern/quant/quant_recipe.h"

namespace tern::plan {

struct PlannedTensor {
  std::string name;  // GGUF names where tern makes the tensor; the file's own otherwise
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // outermost first: a matrix of N rows by K inputs is {N, K}
  uint64_t bytes = 0;

  uint64_t elements() const;
};

// What a tensor is to the decoder, by its GGUF or Hugging Face name.
enum class TensorRole { Q, K, V, O, Gate, Up, Down, TokenEmbedding, Output, Router, Other };
struct TensorPart {
  TensorRole role = TensorRole::Other;
  int64_t layer = -1;  // for the per-layer matrices
  // Gate, Up, Down of a mixture of experts: every expert's stacked (GGUF's ffn_gate_exps) or
  // one expert's (Hugging Face's mlp.experts.N.gate_proj).
  bool experts = false;
  // Gate, Up, Down of qwen2moe's shared expert (ffn_gate_shexp, mlp.shared_expert.gate_proj),
  // which every token reads.
  bool shared_expert = false;
};
TensorPart tensor_part(std::string_view name);

// The bytes of one tensor type in a plan.
struct TypeTotal {
  DType dtype = DType::F32;
  int64_t tensors = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;
};

struct WeightPlan {
  std::vector<PlannedTensor> tensors;
  // Where the types come from: "the file's", "config.json's torch_dtype (BF16)", "--weight-type
  // Q4_K_M".
  std::string types;
  bool tied_embeddings = false;  // lm_head is the token embedding table
  // A mixture of experts': each token reads experts_per_token of num_experts experts.
  int64_t num_experts = 0, experts_per_token = 0;

  uint64_t total_bytes() const;
  uint64_t parameters() const;
  // Per type, most bytes first.
  std::vector<TypeTotal> by_type() const;
  // What one decode step reads: every tensor but an untied token-embedding table (a decode
  // reads one row of it) and a tied checkpoint's own lm_head copy (tern reads the embedding);
  // of the experts, the share one token chooses (the active parameters, not the total).
  uint64_t bytes_read_per_token() const;
  // The extra copy `device` makes at load (Device::prepare_weights): on the CPU, a tied
  // embedding that the best ISA reads in a packed layout is packed for lm_head while its rows
  // stay for the lookups; every other packed matrix leaves its file pages, so it costs nothing
  // more.
  uint64_t repacked_bytes(const Device& device) const;
  // The matrices the decoder multiplies by, in layer order (q, k, v, o, gate, up, down per
  // layer; one expert's in a sparse layer), and lm_head; what the working memory depends on.
  // [layer][q k v o gate up down], then a shared expert's gate, up and down where there is one.
  std::vector<std::vector<MatrixShape>> layer_matrices() const;
  MatrixShape lm_head() const;
};

// The tensors tern makes for a model of `config` (dummy weights, `tern quantize`, `--weight-type`):
// token_embd, per layer the norms, q/k/v/o, their biases where the config has them, q/k norms
// (qwen3), gate/up/down (+ biases) or a sparse layer's router and stacked experts, output_norm,
// output unless tied, rope_freqs for llama3
// scaling, as save_gguf writes them. Matrices get the recipe's types (fallbacks for their row
// length applied), vectors `vector_dtype` (F32 as tern writes them; a checkpoint's own type
// when describing one).
std::vector<PlannedTensor> model_tensors(const ModelConfig& config, const QuantRecipe& recipe,
                                         DType vector_dtype = DType::F32);

// A plan of the file's own tensors. Throws tern::Error for a tensor whose size its type does
// not give.
WeightPlan plan_file_weights(const ModelConfig& config, const std::vector<TensorInfo>& tensors);
// What `--weight-type` makes of a model: model_tensors(config, recipe), plus a GGUF's rope_freqs
// divisors (`file_tensors`), which requantizing carries as F32.
WeightPlan plan_recipe_weights(const ModelConfig& config, const QuantRecipe& recipe,
                               const std::vector<TensorInfo>& file_tensors = {});
// A config alone, as its checkpoint would be: every tensor of `dtype` (its torch_dtype).
WeightPlan plan_checkpoint_weights(const ModelConfig& config, DType dtype);

}  // namespace tern::plan
