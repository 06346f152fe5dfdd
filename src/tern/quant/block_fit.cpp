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

// Round to nearest, ties to even (|v| < 2^22), then clamp to [lo, hi], in floats: adding and
// subtracting 1.5 · 2^23 leaves the rounded value, independent of the rounding mode and libm,
// and without int conversions the compiler vectorises the loops that call it.
inline float round_clamp(float v, float lo, float hi) {
  constexpr float kMagic = 12582912.0f;
  const float r = (v + kMagic) - kMagic;
  return r < lo ? lo : (r > hi ? hi : r);
}

// Sums over a block in kLanes partial sums, element i into lane i % kLanes, added up in a fixed
// order: the compiler vectorises the lanes (a float sum in one accumulator it may not
// reorder), and the result does not depend on the instruction set. Blocks (16, 32, 256
// elements; 8 or 16 sub-block scales) are whole multiples of kLanes.
constexpr int kLanes = 8;
struct LaneSum {
  float v[kLanes] = {};
  float total() const { return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7])); }
};

// For the quants of x under each of `count` inverse scales (q = round(iscale[c] · x)), the
// weighted sums the least-squares scale needs: Σ w x q and Σ w q². Candidates are the inner
// loop, each in its own accumulator: the compiler vectorises across them, and every sum is
// taken in element order whatever the instruction set.
constexpr int kMaxCandidates = 48;
void symmetric_sums(const float* x, const float* w, int n, const float* iscale, int count, int qmin,
                    int qmax, float* sum_xq, float* sum_qq) {
  const float lo = static_cast<float>(qmin), hi = static_cast<float>(qmax);
  float xq[kMaxCandidates] = {}, qq[kMaxCandidates] = {};
  for (int i = 0; i < n; ++i) {
    const float wi = w[i], xi = x[i], wx = wi * xi;
    for (int c = 0; c < count; ++c) {
      const float v = round_clamp(iscale[c] * xi, lo, hi);
      xq[c] += wx * v;
      qq[c] += wi * v * v;
    }
  }
  std::copy(xq, xq + count, sum_xq);
  std::copy(qq, qq + count, sum_qq);
}

// The same for affine quants from `from` (q = round(iscale[c] · (x − from)) in [0, qmax]):
// Σ w q, Σ w q², Σ w q x.
void affine_sums(const float* x, const float* w, int n, const float* iscale, int count, float from,
                 int qmax, float* sum_q, float* sum_qq, float* sum_qx) {
  const float top = static_cast<float>(qmax);
  float sq[kMaxCandidates] = {}, sqq[kMaxCandidates] = {}, sqx[kMaxCandidates] = {};
  for (int i = 0; i < n; ++i) {
    const float wi = w[i], xi = x[i], d = xi - from, wx = wi * xi;
    for (int c = 0; c < count; ++c) {
      const float v = round_clamp(iscale[c] * d, 0.0f, top);
      sq[c] += wi * v;
      sqq[c] += wi * v * v;
      sqx[c] += wx * v;
    }
  }
  std::copy(sq, sq + count, sum_q);
  std::copy(sqq, sqq + count, sum_qq);
  std::copy(sqx, sqx + count, sum_qx);
}

}  // namespace

float quantize_block(const float* x, const float* w, int n, float scale, float offset, int qmin,
                     int qmax, int* q) {
  int local[kMaxBlock];
  int* out = q != nullptr ? q : local;
  const float lo = static_cast<float>(qmin), hi = static_cast<float>(qmax);
  // A zero scale leaves every quant at the one nearest 0 (the value is the offset alone).
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  LaneSum err;
  for (int i = 0; i < n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float v = round_clamp((x[i + l] - offset) * inv, lo, hi);
      out[i + l] = static_cast<int>(v);
      const float e = x[i + l] - (scale * v + offset);
      err.v[l] += w[i + l] * e * e;
    }
  }
  return err.total();
}

int nearest_quant(float x, float scale, float offset, int qmin, int qmax) {
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  return static_cast<int>(
      round_clamp((x - offset) * inv, static_cast<float>(qmin), static_cast<float>(qmax)));
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
  // With the scale fitted by least squares, the error is Σ w x² − (Σ w x q)² / Σ w q²: the best
  // candidate maximises (Σ w x q)² / Σ w q².
  float best_gain = -1.0f, best_scale = 0.0f;
  auto consider = [&](const float* iscale, int count) {
    float xq[kMaxCandidates], qq[kMaxCandidates];
    symmetric_sums(x, w, n, iscale, count, qmin, qmax, xq, qq);
    bool improved = false;
    for (int c = 0; c < count; ++c) {
      if (qq[c] <= 0.0f) continue;
      const float gain = xq[c] * xq[c] / qq[c];
      if (gain > best_gain) {
        best_gain = gain;
        best_scale = xq[c] / qq[c];
        improved = true;
      }
    }
    return improved;
  };
  // The extreme value at the negative end of the range and at the positive end. With many
  // levels (Q8_0, the K types' 6- and 8-bit scales) a tenth of a level moves little: fewer
  // candidates, and the refits do the rest.
  const int steps = qmax - qmin > 64 ? 3 : kSteps;
  float iscale[kMaxCandidates];
  int count = 0;
  for (const int end : {qmin, qmax}) {
    if (end == 0 || (end == qmax && qmin == -qmax)) continue;
    for (int s = -steps; s <= steps; ++s)
      iscale[count++] = (static_cast<float>(end) + kStep * static_cast<float>(s)) / max;
  }
  consider(iscale, count);
  if (best_gain < 0.0f) return 0.0f;  // every weight 0 where x is not
  for (int r = 0; r < kRefits; ++r) {
    const float refit = 1.0f / best_scale;
    if (!consider(&refit, 1)) break;
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
  AffineFit best{(xmax - xmin) / static_cast<float>(qmax), xmin};
  float best_err = quantize_block(x, w, n, best.scale, best.offset, 0, qmax, nullptr);
  float sw = 0.0f, sx = 0.0f, sxx = 0.0f;
  for (int i = 0; i < n; ++i) {
    sw += w[i];
    sx += w[i] * x[i];
    sxx += w[i] * x[i] * x[i];
  }
  // The weighted least-squares (scale, offset) for the quants of each inverse scale from
  // `from`, the best kept when it lowers the error (expanded from the sums: one pass over the
  // block for all candidates).
  auto consider = [&](const float* iscale, int count, float from) {
    float sq[kMaxCandidates], sqq[kMaxCandidates], sqx[kMaxCandidates];
    affine_sums(x, w, n, iscale, count, from, qmax, sq, sqq, sqx);
    bool improved = false;
    for (int c = 0; c < count; ++c) {
      const float det = sw * sqq[c] - sq[c] * sq[c];
      if (!(det > 0.0f)) continue;
      float scale = (sw * sqx[c] - sq[c] * sx) / det;
      float offset = (sqq[c] * sx - sq[c] * sqx[c]) / det;
      if (offset_nonpositive && offset > 0.0f) {
        offset = 0.0f;
        scale = sqx[c] / sqq[c];
      }
      if (!(scale > 0.0f)) continue;
      // Σ w (x − scale·q − offset)² for these quants.
      const float err = sxx - 2.0f * scale * sqx[c] - 2.0f * offset * sx + scale * scale * sqq[c] +
                        2.0f * scale * offset * sq[c] + offset * offset * sw;
      if (!(err < best_err)) continue;
      best_err = err;
      best = {scale, offset};
      improved = true;
    }
    return improved;
  };
  const float range = xmax - xmin;
  float iscale[kMaxCandidates];
  int count = 0;
  for (int s = -kSteps; s <= kSteps; ++s)
    iscale[count++] = (static_cast<float>(qmax) + kStep * static_cast<float>(s)) / range;
  consider(iscale, count, xmin);
  for (int r = 0; r < kRefits; ++r) {
    const float refit = 1.0f / best.scale;
    if (!consider(&refit, 1, best.offset)) break;
  }
  return best;
}

}  // namespace tern::quant
