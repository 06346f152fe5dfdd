// gpt-oss's Hugging Face experts. The published checkpoints store them in OpenAI's MXFP4 tensors
// (transformers' integrations/mxfp4.py), which hold ggml's MXFP4 blocks' codes and exponents in
// another order:
//   `<name>_blocks` U8 [n, rows, cols / 32, 16]: two e2m1 codes a byte, element 2i in byte i's
//                  lower nibble and 2i + 1 in its upper (ggml: byte j holds elements j and j + 16);
//   `<name>_scales` U8 [n, rows, cols / 32]: each block's E8M0 exponent, w = 2^(s − 127) · e2m1,
//                  which is ggml's 2^(e − 128) · (2 · e2m1) with e = s.
// The rows are each matrix's outputs, as a Linear's weight. Unquantized ones (the BF16
// checkpoints: `<name>` [n, cols, rows]) hold each expert inputs first, the transpose of a
// Linear's weight.
#pragma once

#include <cstdint>

#include "tern/formats/tensor_info.h"
#include "tern/weights/model_weights.h"

namespace tern {

// Rows first_row, first_row + row_step, … of each of the `n` matrices [rows, cols] of an OpenAI
// MXFP4 pair, as one stacked MXFP4 matrix [n · rows / row_step, cols] in storage owned by `w`:
// row_step 2 splits gpt-oss's gate_up_proj, whose even outputs are the gate and odd the up.
// Throws tern::Error naming the tensors when their types or shapes are not such a pair.
WeightMatrix openai_mxfp4_rows(const TensorInfo& blocks, const TensorInfo& scales, int64_t n,
                               int64_t rows, int64_t cols, int64_t first_row, int64_t row_step,
                               ModelWeights& w);

// The same rows of an unquantized tensor [n, cols, rows] (F32, F16 or BF16), transposed into one
// stacked matrix [n · rows / row_step, cols] of its type (values copied, not converted). Throws
// tern::Error naming the tensor when its type or shape is not such a tensor.
WeightMatrix openai_transposed_rows(const TensorInfo& t, int64_t n, int64_t rows, int64_t cols,
                                    int64_t first_row, int64_t row_step, ModelWeights& w);

}  // namespace tern
