// GPTQ (Frantar et al., 2022): quantizing a row column by column, each column's rounding error
// passed on to the columns not yet quantized, in the proportions that cancel it best on the
// calibration inputs. For a matrix whose input x has second moments H = E[x xᵀ], the output
// error of a row's error δ is δᵀ H δ (an importance matrix keeps only H's diagonal, and so
// only Σ H_jj δ_j²). With U the upper Cholesky factor of H⁻¹ (H⁻¹ = Uᵀ U), quantizing column j
// with error e_j and then subtracting (e_j / U_jj) · U_j,j+1.. from the later columns minimises
// that error over them; the block scales are fitted to the columns as they stand when their
// block is reached.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/quant/block_code.h"

namespace tern::quant {

class GptqFactor {
 public:
  // second_moments: [cols × cols], E[x xᵀ] (symmetric). A column never activated (H_jj = 0)
  // gets H_jj = 1, and `damp` · mean(H_jj) is added to the diagonal (GPTQ's damping: with
  // fewer calibration tokens than columns H is singular). Throws tern::Error when H is not
  // positive definite even so (a file's values that are no second moments).
  static GptqFactor of(std::span<const float> second_moments, int64_t cols, double damp = 0.01);

  int64_t cols() const { return cols_; }
  const float* row(int64_t j) const { return u_.data() + j * cols_; }  // U_j,· (0 left of j)

 private:
  int64_t cols_ = 0;
  std::vector<float> u_;  // row-major [cols × cols], upper triangular
};

// x: [k] floats, k = factor.cols(), whole blocks of `dtype` (a type with a block code:
// block_code.h); y: dtype_bytes(dtype, k) bytes; `rule` the affine groups' constraint. Throws
// tern::Error for another k.
void quantize_row_gptq(DType dtype, const float* x, void* y, int64_t k, const GptqFactor& factor,
                       AffineRule rule = AffineRule::ZeroPoint);

// GPTQ's act-order (desc_act): the columns in order of decreasing H_jj (ties in column order),
// so that the inputs whose errors cost most are quantized first, while the most columns remain
// to absorb their errors. order[i] is the column quantized i-th; groups are runs of this order.
std::vector<int32_t> act_order(std::span<const float> second_moments, int64_t cols);
// H with its rows and columns in `order` (H'_ab = H_order[a],order[b]).
std::vector<float> permuted_moments(std::span<const float> second_moments,
                                    std::span<const int32_t> order);

}  // namespace tern::quant
