// Quantizing model weights: each block's scales (and offsets, sub-block scales) chosen to
// minimise the importance-weighted squared error Σ_j I_j (w_j − ŵ_j)², I_j the mean squared
// activation of input column j (an importance matrix, importance_matrix.h), or the plain
// squared error without one. What `tern quantize` and `--weight-type` requantization write (GPTQ,
// gptq.h, where an importance matrix has the input's whole second moments); the row
// quantizers of blocks/quantize_row.h stay the fast ones, for activations and dummy
// weights.
#pragma once

#include <cstdint>

#include "tern/core/dtype.h"
#include "tern/quant/block_code.h"

namespace tern::quant {

// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS,
// MXFP4, INT4_G*, INT8_G*, and the lattice types blocks/lattice_fit.h writes (IQ3_XXS, IQ3_S),
// which have no BlockCode: GPTQ passes them by (quantize_weights fits them to the importances).
bool has_weight_quantizer(DType dtype);

// x: [k] floats, k whole blocks of `dtype`; y: dtype_bytes(dtype, k) bytes. importance: [k]
// non-negative values (nullptr: all 1); a block whose importances are all 0 is fitted with
// equal ones; a lattice type without importances takes lattice_fit.h's weights of that case.
// `rule`: the affine groups' constraint (block_code.h). Throws tern::Error for
// another type or a row that is not whole blocks.
void quantize_weight_row(DType dtype, const float* x, void* y, int64_t k, const float* importance,
                         AffineRule rule = AffineRule::ZeroPoint);
// Rows in parallel (OpenMP), each as quantize_weight_row with the same importance [k].
void quantize_weight_rows(DType dtype, const float* x, void* y, int64_t rows, int64_t k,
                          const float* importance, AffineRule rule = AffineRule::ZeroPoint);

// Σ_j importance_j (x_j − ŵ_j)² of a quantized row y (importance nullptr: all 1).
double weighted_error(DType dtype, const float* x, const void* y, int64_t k,
                      const float* importance);

}  // namespace tern::quant
