// Fitting blocks of MXFP4, whose 16 levels (kMxfp4Levels) sit under a power-of-two scale: the
// row quantizer (quantize_mxfp4.cpp) and the weight quantizers' block codes (quant/block_code.cpp)
// share these searches.
#pragma once

#include <cstdint>

namespace tern {

// The index (0..15) of the level L of kMxfp4Levels whose L · d is nearest x (ties to the lower
// index: zero is +0, index 0).
int nearest_mxfp4_level(float x, float d);

// How hard a fit looks for the exponent: Fast (the row quantizer's) takes llama.cpp's
// e0 = ⌊log2 max |x|⌋ + 125 (the largest element in [8, 16) steps of 2^(e0 − 128), at or past
// the top level 12), so that its blocks are llama-quantize's bit for bit; Search (the weight
// quantizers') tries e0, e0 + 1 and e0 − 1 in that order and keeps the first of least error.
enum class Mxfp4Fit { Fast, Search };

// x, w: [32] (w ≥ 0). The exponent e (scale 2^(e − 128)) and the levels q[32] nearest under it
// (the best for that e) minimising Σ w (x − 2^(e − 128) · L[q])² among `fit`'s candidates.
// All zero: e 0, q all 0.
void fit_mxfp4(const float* x, const float* w, Mxfp4Fit fit, uint8_t* e, int* q);

}  // namespace tern
