// MXFP4's fit (mxfp4_fit.h) and row quantizers (quantize_row_impl.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <span>

#include "tern/blocks/block_layouts.h"
#include "tern/blocks/block_pack.h"
#include "tern/blocks/mxfp4_fit.h"
#include "tern/blocks/quantize_row_impl.h"

namespace tern {

int nearest_mxfp4_level(float x, float d) {
  // |L · d − x| as written: L · d is exact (d a power of two), so this is the distance to the
  // level itself, and no 1/d overflows for the smallest scales.
  int best = 0;
  float best_err = std::fabs(x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Levels[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

void fit_mxfp4(const float* x, const float* w, Mxfp4Fit fit, uint8_t* e, int* q) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  *e = 0;
  std::fill(q, q + kQK, 0);
  if (!(amax > 0.0f)) return;
  const int e0 = static_cast<int>(std::floor(std::log2(amax))) + 125;
  // The error in double: a float's square may overflow or vanish at either end of the scales.
  double best_err = INFINITY;
  int cand[kQK];
  const std::array candidates{e0, e0 + 1, e0 - 1};
  const size_t tries = fit == Mxfp4Fit::Search ? candidates.size() : 1;
  for (const int candidate : std::span(candidates).first(tries)) {
    // Within the exponents: 255 is e8m0's NaN; below 0 (|x| < 2^−125), the smallest scale.
    const int t = std::clamp(candidate, 0, 254);
    const float d = mxfp4_scale(static_cast<uint8_t>(t));
    double err = 0.0;
    for (int j = 0; j < kQK; ++j) {
      cand[j] = nearest_mxfp4_level(x[j], d);
      const double r = static_cast<double>(x[j]) - static_cast<float>(kMxfp4Levels[cand[j]]) * d;
      err += static_cast<double>(w[j]) * r * r;
    }
    if (err < best_err) {
      best_err = err;
      *e = static_cast<uint8_t>(t);
      std::copy(cand, cand + kQK, q);
    }
  }
}

// Rows fitted fast (llama.cpp's exponent) with equal weights, as the other row quantizers.
void quantize_row_mxfp4(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockMxfp4*>(vy);
  float ones[kQK];
  std::fill(ones, ones + kQK, 1.0f);
  int q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    uint8_t e;
    fit_mxfp4(x, ones, Mxfp4Fit::Fast, &e, q);
    pack_mxfp4(e, q, &y[i]);
  }
}

void dequantize_row_mxfp4(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockMxfp4*>(vx);
  for (int64_t i = 0; i < k / kQK; ++i, y += kQK)
    unpack_lookup_block(x[i].qs, kMxfp4Levels, mxfp4_scale(x[i].e), y);
}

}  // namespace tern
