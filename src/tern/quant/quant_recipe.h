// Which weight type each matrix of a model gets under a GGUF file type: llama.cpp's
// llama-quantize mixtures (Q4_K_M, Q5_K_S, …) for dense llama / qwen2 / qwen3 decoders, so that
// a file tern writes has the per-tensor types `llama-quantize … Q4_K_M` would have given it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tern/core/dtype.h"
#include "tern/formats/model_config.h"

namespace tern {

// llama.cpp's llama_ftype: the value of a GGUF's `general.file_type`, which llama.cpp shows
// as the file's type ("Q4_K - Medium"). Only the ones tern can write.
enum class FileType : uint32_t {
  AllF32 = 0,
  MostlyF16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q8_0 = 7,
  Q5_0 = 8,
  Q5_1 = 9,
  Q2_K = 10,
  Q3_K_S = 11,
  Q3_K_M = 12,
  Q3_K_L = 13,
  Q4_K_S = 14,
  Q4_K_M = 15,
  Q5_K_S = 16,
  Q5_K_M = 17,
  Q6_K = 18,
  IQ2_XXS = 19,
  IQ2_XS = 20,
  Q2_K_S = 21,
  IQ3_XS = 22,  // IQ3_S, with IQ3_XXS for attn_q, attn_k and the middle layers' ffn_gate, ffn_up
  IQ3_XXS = 23,
  IQ1_S = 24,
  IQ4_NL = 25,
  IQ3_S = 26,
  IQ3_M = 27,  // IQ3_S, with Q4_K for attn_v, attn_output and the first eighth of ffn_down
  IQ2_S = 28,  // (llama.cpp's: most matrices IQ2_XS, not IQ2_S)
  IQ2_M = 29,
  IQ4_XS = 30,
  IQ1_M = 31,
  MostlyBF16 = 32,
  MXFP4_MOE = 38,  // the experts MXFP4, every other matrix Q8_0 (gpt-oss's published files)
};

std::string_view file_type_name(FileType type);  // "Q4_K_M", "F16", …
std::optional<FileType> file_type_from_name(
    std::string_view name);                                   // "q4_k_m", "Q8_0", … (any case)
std::optional<FileType> file_type_from_gguf(uint32_t value);  // nullopt for types tern cannot write
// The type of most matrices (llama.cpp's llama_ftype_get_default_type): Q4_K for Q4_K_M.
DType file_type_base(FileType type);
// The file type of a model whose matrices are all `dtype` (Q4_K → Q4_K_S, MXFP4 → MXFP4_MOE:
// the closest llama.cpp name). Throws tern::Error for a type no file type describes.
FileType uniform_file_type(DType dtype);

// The type a matrix of `cols`-element rows gets when `want` is asked for: `want` when its rows
// are whole blocks, else llama.cpp's fallback (Q2_K, Q3_K, IQ4_XS → IQ4_NL, Q4_K → Q5_0,
// Q5_K → Q5_1, Q6_K → Q8_0) when that fits, else F16. (llama-quantize refuses a shape no fallback
// fits; tern keeps F16 so that tiny test models such as stories260K, 172-wide ffn_down, still
// load.)
DType fitting_type(DType want, int64_t cols);

// The model-wide facts the mixtures depend on.
struct RecipeModel {
  int64_t num_layers = 0;
  bool tied_embeddings = false;  // no output.weight: token_embd is also the output matrix
  bool is_70b = false;           // llama.cpp's LLM_TYPE_70B: attn_v gets at least Q5_K
  int64_t gqa = 1;               // query heads per kv head (llama.cpp's n_gqa)
  // An importance matrix guides the quantization (llama.cpp's has_imatrix): the IQ4 types then
  // leave the first eighth of ffn_down at their base, and IQ3_XXS its attn_v and ffn_down.
  bool has_imatrix = false;

  static RecipeModel of(const ModelConfig& config);
};

// One matrix the recipe is asked about (1-D tensors, norms and biases, stay F32 and are never
// asked about).
struct RecipeTensor {
  std::string_view
      name;  // GGUF name: "blk.7.ffn_down.weight", "output.weight", "token_embd.weight"
  // For attn_v and ffn_down: llama.cpp counts the tensors of that kind in file order rather
  // than reading N from the name; in files written in layer order (tern's) the count is the
  // layer. -1 for tensors outside the blocks.
  int64_t layer = -1;
  int64_t cols = 0;  // elements per row (GGUF ne[0]), which must be whole blocks
  // Matrices stacked in the tensor (GGUF ne[2]): a mixture of experts' ffn_*_exps has one per
  // expert. llama.cpp's MXFP4_MOE tells the experts by it (ne[2] > 1).
  int64_t experts = 1;
};

// What a model's matrices are quantized to: one type for all (tern's `--weight-type q4_k`,
// like llama-quantize --pure), or llama-quantize's mixture for a file type (`--weight-type
// q4_k_m`).
class QuantRecipe {
 public:
  static QuantRecipe uniform(DType dtype);
  static QuantRecipe mixture(FileType file_type);
  // llama-quantize --pure: every matrix the file type's base type, the file still named after
  // `file_type` (Q4_K_M --pure: all Q4_K, general.file_type Q4_K_M).
  static QuantRecipe pure(FileType file_type);

  // llama-quantize's --output-tensor-type and --token-embedding-type: output.weight or
  // token_embd.weight gets `type` whatever the mixture says (fallbacks for its row length still
  // apply). Throws tern::Error for a type tern does not quantize to.
  void set_output_type(DType type);
  void set_token_embedding_type(DType type);

  // The type of `tensor` in `model`, fallbacks for its row length applied; a mixture of
  // experts' router (ffn_gate_inp) is always F32. Throws tern::Error
  // for a layer outside [0, num_layers) on a tensor whose choice depends on it.
  DType weight_type(const RecipeModel& model, const RecipeTensor& tensor) const;
  // `general.file_type` of the result; nullopt for a uniform type GGUF has none of (INT4_G128).
  std::optional<FileType> file_type() const;
  // llama-quantize's rule (tensor_requires_imatrix): a matrix of IQ3_XXS, IQ2_XXS, IQ2_XS,
  // IQ2_S, IQ1_S or IQ1_M, or of Q2_K in a Q2_K_S file, is fitted to an importance matrix, and
  // without one it refuses (the result would be garbage). True when some layer matrix of this
  // recipe is (the output and embedding matrices are exempt).
  bool needs_importance_matrix() const;
  // Whether `type` in a file of this recipe needs an importance matrix, as above.
  bool needs_importance_matrix(DType type) const;
  bool is_uniform() const { return uniform_.has_value(); }
  std::string name() const;  // "Q4_K_M" for a mixture, "Q4_K" for uniform Q4_K

 private:
  std::optional<DType> uniform_;
  std::optional<FileType> file_type_ = FileType::AllF32;
  std::optional<DType> output_type_, token_embedding_type_;
};

// `--weight-type` (`flag`): "auto" → nullopt; a file type with a mixture ("q4_k_m", "q3_k_m",
// "iq3_m", …) → its mixture; a weight type ("q4_0", "Q4_K", "iq3_s", "bf16", "float16", …) →
// uniform. A load-time requantization has no importance matrix, so what needs one (q2_k_s,
// iq3_xxs, iq3_xs, the IQ2 and IQ1 types) is refused, naming `tern quantize --imatrix`. Throws
// tern::Error listing the choices for anything else.
std::optional<QuantRecipe> parse_weight_recipe(const std::string& name,
                                               std::string_view flag = "--weight-type");

// vLLM's `--dtype` (`flag`): the type the matrices stored unquantized (F32, F16, BF16) are
// converted to; "auto" → nullopt (as stored). vLLM's names (auto, half, float16, bfloat16,
// float, float32) and f16, bf16, f32. A quantized type ("q4_0") throws tern::Error saying that
// requantizing is `weight_flag`'s, since vLLM's habit would otherwise pass it by mistake;
// anything else throws listing the choices.
std::optional<DType> parse_float_dtype(const std::string& name, std::string_view flag = "--dtype",
                                       std::string_view weight_flag = "--weight-type");

}  // namespace tern
