// Fitting blocks of the IQ4 types (IQ4_NL, IQ4_XS), whose 16 levels are not evenly spaced: the
// row quantizers (quantize_iq4.cpp) and the weight quantizers' block codes
// (quant/block_code.cpp) share these searches.
#pragma once

#include <cstdint>

namespace tern {

// The index (0..15) of the level of kIq4Levels nearest v (ties to the lower level).
int nearest_iq4_level(float v);

// How hard a fit looks for the scale: Fast (the row quantizers': the largest element on the
// level −127, then the least-squares scale for the levels that gives) or Search (the weight
// quantizers': the largest element on 17 levels near either end of the grid, which is not
// symmetric, each candidate refitted by least squares, the best kept).
enum class Iq4Fit { Fast, Search };

// x, w: [n] (w ≥ 0). The scale d and levels q[n] (indices 0..15) minimising Σ w (x − d · L[q])²
// among the candidates of `fit`; d is not rounded. 0 when x is all zero.
float fit_iq4_scale(const float* x, const float* w, int n, Iq4Fit fit, int* q);

// One IQ4_NL block of 32: the f16 scale, then the levels nearest under it.
void fit_iq4_nl(const float* x, const float* w, Iq4Fit fit, uint16_t* d16, int* q);

// One IQ4_XS super-block of 256: the f16 scale d16, the 8 sub-block scales ls[j] in [−32, 31]
// (stored biased by 32) and the levels under d · ls[j].
void fit_iq4_xs(const float* x, const float* w, Iq4Fit fit, uint16_t* d16, int* ls, int* q);

}  // namespace tern
