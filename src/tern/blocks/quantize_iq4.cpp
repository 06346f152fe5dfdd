// The IQ4 types' fits (iq4_fit.h) and row quantizers (quantize_row_impl.h).
#include <algorithm>
#include <cmath>

#include "tern/blocks/block_layouts.h"
#include "tern/blocks/block_pack.h"
#include "tern/blocks/iq4_fit.h"
#include "tern/blocks/quantize_row_impl.h"
#include "tern/core/half.h"

namespace tern {
namespace {

float weighted_error(const float* x, const float* w, int n, float d, const int* q) {
  float err = 0.0f;
  for (int e = 0; e < n; ++e) {
    const float r = x[e] - d * static_cast<float>(kIq4Levels[q[e]]);
    err += w[e] * r * r;
  }
  return err;
}

// The levels nearest x / d; d == 0 takes the level nearest zero.
void levels_under(const float* x, int n, float d, int* q) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int e = 0; e < n; ++e) q[e] = nearest_iq4_level(x[e] * id);
}

}  // namespace

int nearest_iq4_level(float v) {
  // Binary search on the sorted levels, then the nearer of the two neighbours.
  int lo = 0, hi = 15;
  if (!(v > kIq4Levels[0])) return 0;
  if (v >= kIq4Levels[15]) return 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (v < kIq4Levels[mid] ? hi : lo) = mid;
  }
  return v - kIq4Levels[lo] <= kIq4Levels[hi] - v ? lo : hi;
}

float fit_iq4_scale(const float* x, const float* w, int n, Iq4Fit fit, int* q) {
  // The element of largest magnitude sets the range.
  int imax = 0;
  for (int e = 1; e < n; ++e)
    if (std::fabs(x[e]) > std::fabs(x[imax])) imax = e;
  const float xmax = x[imax];
  std::fill(q, q + n, nearest_iq4_level(0.0f));
  if (xmax == 0.0f) return 0.0f;
  float best_err = INFINITY, best_d = 0.0f;
  int cand[256];
  const int ends[2] = {kIq4Levels[0], kIq4Levels[15]};
  const int n_ends = fit == Iq4Fit::Search ? 2 : 1, tries = fit == Iq4Fit::Search ? 8 : 0;
  for (int s = 0; s < n_ends; ++s) {
    for (int t = -tries; t <= tries; ++t) {
      const float d0 = xmax / static_cast<float>(ends[s] + t);
      levels_under(x, n, d0, cand);
      // The least-squares scale for these levels: Σ w x L / Σ w L².
      float sxl = 0.0f, sll = 0.0f;
      for (int e = 0; e < n; ++e) {
        const auto l = static_cast<float>(kIq4Levels[cand[e]]);
        sxl += w[e] * x[e] * l;
        sll += w[e] * l * l;
      }
      const float d = sll > 0.0f ? sxl / sll : d0;
      const float err = weighted_error(x, w, n, d, cand);
      if (err < best_err) {
        best_err = err;
        best_d = d;
        std::copy(cand, cand + n, q);
      }
    }
  }
  return best_d;
}

void fit_iq4_nl(const float* x, const float* w, Iq4Fit fit, uint16_t* d16, int* q) {
  *d16 = f32_to_f16(fit_iq4_scale(x, w, kQK, fit, q));
  levels_under(x, kQK, f16_to_f32(*d16), q);
}

void fit_iq4_xs(const float* x, const float* w, Iq4Fit fit, uint16_t* d16, int* ls, int* q) {
  constexpr int kSubs = kQKK / kQK;
  float sub_scale[kSubs];
  int max_sub = 0;
  for (int j = 0; j < kSubs; ++j) {
    sub_scale[j] = fit_iq4_scale(x + kQK * j, w + kQK * j, kQK, fit, q + kQK * j);
    if (std::fabs(sub_scale[j]) > std::fabs(sub_scale[max_sub])) max_sub = j;
  }
  // The largest sub-block scale maps to −32, the end of the 6-bit range with the most room.
  *d16 = f32_to_f16(-sub_scale[max_sub] / 32.0f);
  const float d = f16_to_f32(*d16);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kSubs; ++j) {
    ls[j] = clamp_int(nearest_int(sub_scale[j] * id), -32, 31);
    levels_under(x + kQK * j, kQK, d * static_cast<float>(ls[j]), q + kQK * j);
  }
}

// Rows fitted fast with equal weights (the plain squared error), as the other row quantizers.
void quantize_row_iq4_nl(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockIq4Nl*>(vy);
  float ones[kQK];
  std::fill(ones, ones + kQK, 1.0f);
  int q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    uint16_t d;
    fit_iq4_nl(x, ones, Iq4Fit::Fast, &d, q);
    pack_iq4_nl(d, q, &y[i]);
  }
}

void dequantize_row_iq4_nl(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockIq4Nl*>(vx);
  for (int64_t i = 0; i < k / kQK; ++i, y += kQK)
    unpack_lookup_block(x[i].qs, kIq4Levels, f16_to_f32(x[i].d), y);
}

void quantize_row_iq4_xs(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockIq4Xs*>(vy);
  float ones[kQKK];
  std::fill(ones, ones + kQKK, 1.0f);
  int q[kQKK], ls[kQKK / kQK];
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    uint16_t d;
    fit_iq4_xs(x, ones, Iq4Fit::Fast, &d, ls, q);
    pack_iq4_xs(d, ls, q, &y[i]);
  }
}

void dequantize_row_iq4_xs(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockIq4Xs*>(vx);
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQKK / kQK; ++j, y += kQK)
      unpack_lookup_block(x[i].qs + 16 * j, kIq4Levels,
                          d * static_cast<float>(iq4_xs_scale(x[i], j) - 32), y);
  }
}

}  // namespace tern
