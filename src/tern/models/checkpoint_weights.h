// The matrices of GPTQ, AWQ and MLX checkpoints as tern's affine groups (INT4_G*, INT8_G*;
// blocks/block_layouts.h), repacked once at load: every group keeps its scale and
// zero point (or bias) exactly, and an act-order checkpoint's groups become runs of
// consecutive inputs by a permutation of the inputs that the matmul gathers its activations by.
//
// The packings, as their writers lay them out (N outputs, K inputs, G the group size):
//   GPTQ  qweight I32 [K·bits/32, N]: 32/bits codes per word along the inputs, lowest first;
//         qzeros I32 [K/G, N·bits/32]: the zeros the same way along the outputs, stored as
//         zero − 1 by AutoGPTQ ("gptq", v1: the kernels add the 1 back) and as the zero by
//         GPTQModel's "gptq_v2"; scales F16 [K/G, N]; g_idx I32 [K], each input's group.
//         w = scale · (q − zero).
//   AWQ   qweight I32 [K, N/8], 8 outputs per word in the order 0 2 4 6 1 3 5 7 (output j of
//         a word at nibble 0 4 1 5 2 6 3 7); qzeros I32 [K/G, N/8] alike; scales F16 [K/G, N].
//         w = scale · (q − zero).
//   MLX   weight U32 [N, K·bits/32]: codes along the inputs, lowest bits first; scales and
//         biases [N, K/G] (F16, BF16 or F32). w = scale · q + bias.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tern/formats/checkpoint_quantization.h"
#include "tern/formats/tensor_info.h"
#include "tern/models/weight_loader.h"

namespace tern {

// AWQ's word holds output j of its 8 at nibble kAwqNibbleOfOutput[j].
inline constexpr int kAwqNibbleOfOutput[8] = {0, 4, 1, 5, 2, 6, 3, 7};

using FindTensor = std::function<const TensorInfo*(std::string_view)>;

// The input permutations of one model's act-order matrices, each kept once: q, k and v (or gate
// and up) quantized with one input's Hessian share theirs, and so one gathering of it.
class InputOrders {
 public:
  const int32_t* intern(std::vector<int32_t> order, ModelWeights& w);

 private:
  std::vector<std::span<const int32_t>> kept_;
};

// Module `module` ("model.layers.0.mlp.up_proj") of a quantized checkpoint as `rows` × `cols`
// rows of its INT*_G* type owned by `w`, when the checkpoint holds it quantized (GPTQ and AWQ:
// `module.qweight`; MLX: `module.scales`); nullopt when it holds a float `module.weight`.
// Throws tern::Error naming `source` and the tensor for a missing tensor, a shape or dtype
// that disagrees with `q` and the config, a g_idx out of range or groups of unequal size.
std::optional<WeightMatrix> read_quantized_matrix(const CheckpointQuantization& q,
                                                  const FindTensor& find, const std::string& source,
                                                  const std::string& module, int64_t rows,
                                                  int64_t cols, ModelWeights& w,
                                                  InputOrders& orders);

// `tensors` as tern holds them once loaded: each quantized module's tensors (qweight, qzeros,
// scales, g_idx; MLX's weight, scales, biases) become one `module.weight` of its INT*_G* type
// and logical shape [outputs, inputs], its bytes those of the repacked rows; the rest stay. For
// `tern plan`, which reads headers only: no data is touched, and a module whose tensors do not
// fit together is left as it is (loading it would say what is wrong).
std::vector<TensorInfo> as_repacked_tensors(const CheckpointQuantization& q,
                                            const std::vector<TensorInfo>& tensors);

}  // namespace tern
