// The searches behind every weight quantizer: for a block of n values x with importances w
// (w ≥ 0), the scale (and offset) whose quants minimise Σ w (x − x̂)². Each tries a range of
// candidate scales, refits the best by weighted least squares for the quants it gives, then
// alternates "quants for this scale" and "scale for these quants" until the error stops
// falling: coordinate descent from the best of many starts.
#pragma once

#include <cstdint>

namespace tern::quant {

// x ≈ scale · q, q integer in [qmin, qmax] (qmin ≤ 0 < qmax). The scale may be negative, so
// that the side of the range with more levels can take the value of largest magnitude.
// Returns 0 when every x (or every weight) is 0.
float fit_symmetric(const float* x, const float* w, int n, int qmin, int qmax);

// x ≈ scale · q + offset, q integer in [0, qmax], scale ≥ 0; with `offset_nonpositive` the
// offset is ≤ 0 (the K types store it as an unsigned min).
struct AffineFit {
  float scale = 0.0f;
  float offset = 0.0f;
};
AffineFit fit_affine(const float* x, const float* w, int n, int qmax, bool offset_nonpositive);

// The weighted squared error of x against its quants under a fixed scale and offset, the quants
// rounded to nearest and clamped to [qmin, qmax]; q (may be null) receives them.
float quantize_block(const float* x, const float* w, int n, float scale, float offset, int qmin,
                     int qmax, int* q);

// The quant of one value under a scale and offset, as quantize_block rounds it.
int nearest_quant(float x, float scale, float offset, int qmin, int qmax);

}  // namespace tern::quant
