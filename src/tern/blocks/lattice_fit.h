// Fitting rows of the lattice types (IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M) to x
// with importance weights, by llama.cpp's searches (ggml-quants.c's quantize_row_iq*_impl) over
// lattice_search.h's grids. The signed types: per sub-block the signs, then a scan of candidate
// scales, each group taking the grid entry of least weighted error under it, the best refitted
// by least squares. The 1-bit types: per sub-block the exact best split of the sorted values
// into the levels −1, 0, 1 (with each pattern of ±1/8 shifts), then the grid entries nearest it.
// Then the super-block's f16 scale and the 4- (3-) bit sub-block scales, each sub-block's
// entries chosen again under its stored scale. The row quantizers (quantize_row.h) and the
// weight quantizers (quant/weight_quantizer.h) share it.
#pragma once

#include <cstdint>

#include "tern/core/dtype.h"

namespace tern {

// The types fit_lattice_row writes.
bool has_lattice_fit(DType dtype);

// x: [k], k whole super-blocks of 256; y: dtype_bytes(dtype, k) bytes. importance: [k] ≥ 0, the
// mean squared activation of each column (an importance matrix); each element's weight is
// importance · sqrt(σ² + x²), σ² the super-block's mean square (llama.cpp's). Without one
// (nullptr) the weights are ggml's own where its row quantizer takes no importance matrix
// (IQ3_XXS, IQ3_S, IQ1_M: x²; IQ2_S: σ² / 4 + x²), and importance 1 where it asserts one (IQ2_XXS,
// IQ2_XS, IQ1_S): what `--load-format dummy` and the tests use. `tern quantize` refuses the types
// llama-quantize refuses without --imatrix (all but IQ3_S; quant/quant_recipe.h).
void fit_lattice_row(DType dtype, const float* x, void* y, int64_t k, const float* importance);

}  // namespace tern
