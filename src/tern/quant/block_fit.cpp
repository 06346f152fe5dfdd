// Scale searches for the weight quantizers (see block_fit.h).
#include "tern/quant/block_fit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tern::quant {
namespace {

constexpr int kMaxBlock = 256;
// Candidate inverse scales: the extreme value mapped to the end of the range ± kSteps steps of
// kStep levels (llama.cpp's make_qx_quants tries ±0.9 in steps of 0.1 on one side).
constexpr int kSteps = 10;
constexpr float kStep = 0.1f;
constexpr int kRefits = 4;

// Round to nearest, ties to even (|v| < 2^22), independent of the rounding mode and libm.
inline int nearest_int(float v) {
  float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}
inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Quants of x under inverse scale `iscale` (q = round(iscale · x)), with the weighted sums the
// least-squares scale needs: Σ w x q and Σ w q².
void symmetric_quants(const float* x, const float* w, int n, float iscale, int qmin, int qmax,
                      int* q, float* sum_xq, float* sum_qq) {
  float xq = 0.0f, qq = 0.0f;
  for (int i = 0; i < n; ++i) {
    q[i] = clamp_int(nearest_int(iscale * x[i]), qmin, qmax);
    const float l = static_cast<float>(q[i]);
    xq += w[i] * x[i] * l;
    qq += w[i] * l * l;
  }
  *sum_xq = xq;
  *sum_qq = qq;
}

}  // namespace

float quantize_block(const float* x, const float* w, int n, float scale, float offset, int qmin,
                     int qmax, int* q) {
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = scale != 0.0f ? clamp_int(nearest_int((x[i] - offset) * inv), qmin, qmax)
                                : clamp_int(0, qmin, qmax);
    if (q != nullptr) q[i] = l;
    const float e = x[i] - (scale * static_cast<float>(l) + offset);
    err += w[i] * e * e;
  }
  return err;
}

float fit_symmetric(const float* x, const float* w, int n, int qmin, int qmax) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  int q[kMaxBlock];
  // With the scale fitted by least squares, the error is Σ w x² − (Σ w x q)² / Σ w q²: the best
  // candidate maximises (Σ w x q)² / Σ w q².
  float best_gain = -1.0f, best_scale = 0.0f;
  auto consider = [&](float iscale) {
    float xq, qq;
    symmetric_quants(x, w, n, iscale, qmin, qmax, q, &xq, &qq);
    if (qq <= 0.0f) return;
    const float gain = xq * xq / qq;
    if (gain > best_gain) {
      best_gain = gain;
      best_scale = xq / qq;
    }
  };
  // The extreme value at the negative end of the range and at the positive end. With many
  // levels (Q8_0, the K types' 6- and 8-bit scales) a tenth of a level moves little: fewer
  // candidates, and the refits do the rest.
  const int steps = qmax - qmin > 64 ? 3 : kSteps;
  for (const int end : {qmin, qmax}) {
    if (end == 0 || (end == qmax && qmin == -qmax)) continue;
    for (int s = -steps; s <= steps; ++s) consider((static_cast<float>(end) + kStep * static_cast<float>(s)) / max);
  }
  if (best_gain < 0.0f) return 0.0f;  // every weight 0 where x is not
  for (int r = 0; r < kRefits; ++r) {
    const float before = best_gain;
    consider(1.0f / best_scale);
    if (!(best_gain > before)) break;
  }
  return best_scale;
}

AffineFit fit_affine(const float* x, const float* w, int n, int qmax, bool offset_nonpositive) {
  float xmin = x[0], xmax = x[0];
  for (int i = 1; i < n; ++i) {
    xmin = std::min(xmin, x[i]);
    xmax = std::max(xmax, x[i]);
  }
  if (offset_nonpositive) xmin = std::min(xmin, 0.0f);
  if (xmax <= xmin) return {0.0f, xmin};
  int q[kMaxBlock];
  AffineFit best{(xmax - xmin) / static_cast<float>(qmax), xmin};
  float best_err = quantize_block(x, w, n, best.scale, best.offset, 0, qmax, nullptr);
  // The weighted least-squares (scale, offset) for the quants of inverse scale `iscale` from
  // xmin, kept when it lowers the error.
  float sw = 0, sx = 0, sxx = 0;
  for (int i = 0; i < n; ++i) {
    sw += w[i];
    sx += w[i] * x[i];
    sxx += w[i] * x[i] * x[i];
  }
  // The weighted least-squares (scale, offset) for the quants of inverse scale `iscale` from
  // `from`, kept when it lowers the error (expanded from the sums: one pass per candidate).
  auto consider = [&](float iscale, float from) {
    float sq = 0, sqq = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      q[i] = clamp_int(nearest_int(iscale * (x[i] - from)), 0, qmax);
      const float l = static_cast<float>(q[i]);
      sq += w[i] * l;
      sqq += w[i] * l * l;
      sqx += w[i] * l * x[i];
    }
    const float det = sw * sqq - sq * sq;
    if (!(det > 0.0f)) return false;
    float scale = (sw * sqx - sq * sx) / det;
    float offset = (sqq * sx - sq * sqx) / det;
    if (offset_nonpositive && offset > 0.0f) {
      offset = 0.0f;
      scale = sqx / sqq;
    }
    if (!(scale > 0.0f)) return false;
    // Σ w (x − scale·q − offset)² for these quants.
    const float err = sxx - 2.0f * scale * sqx - 2.0f * offset * sx + scale * scale * sqq +
                      2.0f * scale * offset * sq + offset * offset * sw;
    if (!(err < best_err)) return false;
    best_err = err;
    best = {scale, offset};
    return true;
  };
  const float range = xmax - xmin;
  for (int s = -kSteps; s <= kSteps; ++s)
    consider((static_cast<float>(qmax) + kStep * static_cast<float>(s)) / range, xmin);
  for (int r = 0; r < kRefits; ++r)
    if (!consider(1.0f / best.scale, best.offset)) break;
  return best;
}

}  // namespace tern::quant
