// Making ModelWeights (weights/model_weights.h): from GGUF and safetensors files in place, dummy,
// requantized, converted to another float type, packed for the kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/formats/model_config.h"
#include "tern/quant/block_code.h"
#include "tern/quant/quant_recipe.h"
#include "tern/weights/model_weights.h"

namespace tern {

class GgufFile;
class ImportanceMatrix;
class MappedFile;
class SafetensorsModel;
struct CheckpointQuantization;

// GGUF tensors (`token_embd.weight`, `blk.N.attn_q.weight`, …) in place from the mapping the
// file holds (kept alive by the result). Throws tern::Error naming the file and tensor for a
// missing tensor, a shape that disagrees with `config`, or a type tern cannot multiply.
ModelWeights load_gguf_weights(const GgufFile& gguf, const ModelConfig& config);

// Hugging Face tensors (`model.embed_tokens.weight`, `model.layers.N.self_attn.q_proj.weight`,
// …, `lm_head.weight`) in F32/F16/BF16, matrices in place, norms and biases widened to f32.
// With `quantization` (a GPTQ, AWQ or MLX checkpoint), the modules it holds quantized are
// repacked into tern's affine groups (models/checkpoint_weights.h); the others load as above.
ModelWeights load_safetensors_weights(const SafetensorsModel& model, const ModelConfig& config,
                                      const CheckpointQuantization* quantization = nullptr);

// vLLM's `--load-format dummy`: random weights of the config's shapes, each matrix quantized
// to the type `recipe` gives it (uniform: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
// Q5_K, Q6_K; or a llama.cpp mixture such as Q4_K_M), values uniform with standard deviation
// 0.02 like an initialiser, norms 1, biases 0. The same seed gives the same weights whatever
// the thread count. A matrix whose rows are not whole blocks of its type gets llama.cpp's
// fallback (Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0 when those fit), else F16: stories260K's
// 172-wide ffn_down, or 64-wide rows under a K type.
ModelWeights make_dummy_weights(const ModelConfig& config, const QuantRecipe& recipe,
                                uint64_t seed = 0);
ModelWeights make_dummy_weights(const ModelConfig& config, DType dtype, uint64_t seed = 0);

struct QuantizeOptions {
  // Per matrix (by GGUF name), the importance of each input column: the weight quantizers
  // minimise the error weighted by it (quant/weight_quantizer.h). nullptr, or a matrix without
  // an entry: the plain squared error.
  const ImportanceMatrix* imatrix = nullptr;
  // What the affine groups' scale and offset may be (quant/block_code.h): the constraint of the
  // checkpoint format they will be written to.
  quant::AffineRule affine_rule = quant::AffineRule::ZeroPoint;
  // GPTQ's act-order (desc_act) for the layers' matrices quantized by GPTQ (quant/gptq.h): the
  // columns quantized in order of decreasing E[x_j²], each run of that order a group; such a
  // matrix keeps its groups' inputs ascending and carries the permutation
  // (WeightMatrix::input_order), as an act-order checkpoint loads. Affine groups only.
  bool act_order = false;
  // AWQ's activation-aware scaling (quant/awq.h) of each layer before it is quantized, from
  // `imatrix`'s importances (required); the layer's matrices are then quantized by the weighted
  // fit under the scaled inputs' importances, never by GPTQ.
  bool awq = false;
  // After each matrix: its GGUF name, its type before and after, matrices done and in all.
  std::function<void(const std::string& name, DType from, DType to, int64_t done, int64_t total)>
      on_matrix;
};

// A copy whose matrices (embedding and lm_head included) are requantized as `recipe` says
// (with the same fallbacks) through f32 by the weight quantizers, and whose vectors are
// copied: it does not depend on `src`. `config` gives the model-wide facts a mixture depends
// on. A matrix already of its recipe type is copied as it is.
ModelWeights quantize_weights(const ModelWeights& src, const ModelConfig& config,
                              const QuantRecipe& recipe, const QuantizeOptions& options = {});
ModelWeights quantize_weights(const ModelWeights& src, DType dtype);

// vLLM's --dtype: each matrix stored unquantized (F32, F16, BF16), embedding and lm_head
// included, becomes `dtype` (a float type) in memory `w` owns; quantized matrices keep their
// type and their bytes (a mapped file's stay mapped, not copied). A float file type follows
// the conversion (F16 → BF16); a quantized one (Q4_K_M) keeps its name. Before
// Device::prepare_weights.
void convert_float_matrices(ModelWeights& w, DType dtype);

// The GGUF names of a layer's tensors ("blk.3.attn_q.weight").
std::string gguf_tensor_name(int64_t layer, std::string_view what);

}  // namespace tern
