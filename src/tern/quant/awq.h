// AWQ's activation-aware scaling (Lin et al., 2023): a weight column whose input is large costs
// more output error per unit of weight error, so before quantizing, the columns of the matrices
// that read an input x are multiplied by s_j and the op that produces x has its output j divided
// by s_j (an RMSNorm's weight, or the rows of the matrix before: v_proj for o_proj, up_proj for
// down_proj). The function is unchanged in float; the large columns get finer steps.
//
// s = x̄^α / w̄^(1−α) (AutoAWQ's "duo" scaling, normalised so that max(s) · min(s) = 1), x̄_j
// the input's root mean square E[x_j²]^½ (an importance matrix's statistics, not a calibration
// run's activations), w̄_j the mean over rows of |w_ij| / max|w| of its group; α on a grid of 20,
// and s = 1 as a candidate too, chosen by the importance-weighted error the quantized matrices
// give on a sample of their rows: Σ_j E[x_j²] (w_ij − ŵ_ij / s_j)².
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/quant/block_code.h"

namespace tern::quant {

struct FloatMatrix {  // row-major f32 [rows × cols]
  float* data = nullptr;
  int64_t rows = 0, cols = 0;
  float* row(int64_t i) const { return data + i * cols; }
};

// One input x shared by `readers` (each cols = x's size), and the op that produced it: a norm's
// weight `producer_weight` [cols], or the rows of `producer_rows` (rows = x's size) and its
// bias `producer_bias` (empty when none).
struct AwqScalingPoint {
  std::span<float> producer_weight;
  FloatMatrix producer_rows;
  std::span<float> producer_bias;
  std::vector<FloatMatrix> readers;
  std::span<const float> importance;  // E[x_j²] [cols]
};

// The scales s [cols] of the best candidate for the readers quantized to `dtype` under `rule`.
std::vector<float> search_awq_scales(const AwqScalingPoint& point, DType dtype, AffineRule rule);

// Divides the producer's outputs by s and multiplies the readers' columns by it.
void apply_awq_scales(const AwqScalingPoint& point, std::span<const float> s);

}  // namespace tern::quant
