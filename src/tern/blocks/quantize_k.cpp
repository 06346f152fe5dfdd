// Scalar quantizers of the K types (super-blocks of 256): Q4_K and Q5_K fit a scale and a min
// per sub-block of 32, Q2_K per sub-block of 16, Q6_K and Q3_K a signed scale per sub-block of
// 16, each by a small search over candidate scales with a least-squares refit; the sub-block
// scales are then quantized against the super-block scale and the quants recomputed for the
// scales as stored.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tern/blocks/block_layouts.h"
#include "tern/blocks/block_pack.h"
#include "tern/blocks/k_scales.h"
#include "tern/blocks/quantize_row_impl.h"
#include "tern/core/half.h"

namespace tern {
namespace {

constexpr int kSearchSteps = 4;  // candidates nmax ± 1 in steps of 0.25
constexpr float kSearchStep = 0.25f;

// Fits x[i] ≈ scale * q[i] - min with q in [0, nmax], scale ≥ 0, min ≥ 0 (the offset is never
// positive, as the unsigned 6-bit mins require).
void fit_scale_min(const float* x, int n, int nmax, float* scale_out, float* min_out) {
  float xmin = 0.0f, xmax = x[0];
  for (int i = 0; i < n; ++i) {
    xmin = std::min(xmin, x[i]);
    xmax = std::max(xmax, x[i]);
  }
  *scale_out = 0.0f;
  *min_out = -xmin;
  if (xmax <= xmin) return;
  float best_scale = (xmax - xmin) / static_cast<float>(nmax), best_offset = xmin;
  float best_sse = std::numeric_limits<float>::infinity();
  for (int step = -kSearchSteps; step <= kSearchSteps; ++step) {
    const float iscale =
        (static_cast<float>(nmax) + kSearchStep * static_cast<float>(step)) / (xmax - xmin);
    float sl = 0, sll = 0, sx = 0, slx = 0;
    int q[kQK];
    for (int i = 0; i < n; ++i) {
      q[i] = clamp_int(nearest_int(iscale * (x[i] - xmin)), 0, nmax);
      const float l = static_cast<float>(q[i]);
      sl += l;
      sll += l * l;
      sx += x[i];
      slx += l * x[i];
    }
    const float det = static_cast<float>(n) * sll - sl * sl;
    if (det <= 0.0f) continue;
    float s = (static_cast<float>(n) * slx - sl * sx) / det;
    float b = (sll * sx - sl * slx) / det;
    if (b > 0.0f) {
      b = 0.0f;
      s = slx / sll;
    }
    if (s <= 0.0f) continue;
    float sse = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float e = s * static_cast<float>(q[i]) + b - x[i];
      sse += e * e;
    }
    if (sse < best_sse) {
      best_sse = sse;
      best_scale = s;
      best_offset = b;
    }
  }
  *scale_out = best_scale;
  *min_out = -best_offset;
}

// Fits x[i] ≈ scale * q[i] with q in [qmin, qmax] (qmin < 0 < qmax, n ≤ 16); the scale may be
// negative so the side of the range with more levels can take the value of largest magnitude.
float fit_scale_symmetric(const float* x, int n, int qmin, int qmax) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  float best_scale = max / static_cast<float>(qmin),
        best_sse = std::numeric_limits<float>::infinity();
  for (int side = 0; side < 2; ++side) {
    for (int step = -kSearchSteps; step <= kSearchSteps; ++step) {
      const float levels =
          static_cast<float>(side == 0 ? qmin : qmax) + kSearchStep * static_cast<float>(step);
      const float iscale = levels / max;
      float sll = 0, slx = 0;
      int q[16];
      for (int i = 0; i < n; ++i) {
        q[i] = clamp_int(nearest_int(iscale * x[i]), qmin, qmax);
        sll += static_cast<float>(q[i] * q[i]);
        slx += static_cast<float>(q[i]) * x[i];
      }
      if (sll == 0.0f) continue;
      const float s = slx / sll;
      float sse = 0.0f;
      for (int i = 0; i < n; ++i) {
        const float e = s * static_cast<float>(q[i]) - x[i];
        sse += e * e;
      }
      if (sse < best_sse) {
        best_sse = sse;
        best_scale = s;
      }
    }
  }
  return best_scale;
}

// Q6_K / Q3_K: 16 signed sub-block scales ls[16] in [smin, smax] (Q6_K: [-127, 127]; Q3_K:
// [-32, 31]) against the super-block's d, quants q[256] in [qmin, qmax] for them as stored (no
// storage bias). Returns d as f16.
uint16_t quantize_k_symmetric(const float* x, int qmin, int qmax, int smin, int smax, int* ls,
                              int* q) {
  float scales[16], max_abs = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = fit_scale_symmetric(x + 16 * j, 16, qmin, qmax);
    max_abs = std::max(max_abs, std::fabs(scales[j]));
  }
  const uint16_t d16 = f32_to_f16(max_abs / static_cast<float>(smax));
  const float d = f16_to_f32(d16);
  for (int j = 0; j < 16; ++j) {
    ls[j] = d > 0.0f ? clamp_int(nearest_int(scales[j] / d), smin, smax) : 0;
    const float s = d * static_cast<float>(ls[j]);
    for (int l = 0; l < 16; ++l)
      q[16 * j + l] = s != 0.0f ? clamp_int(nearest_int(x[16 * j + l] / s), qmin, qmax) : 0;
  }
  return d16;
}

// Q4_K / Q5_K (8 sub-blocks of 32, 6-bit scales and mins: smax 63) and Q2_K (16 of 16, 4-bit:
// smax 15): scales ls[subs] and mins lm[subs] against the super-block's d and dmin, quants
// q[256] in [0, nmax] for them as stored.
void quantize_k_affine(const float* x, int subs, int nmax, int smax, uint16_t* d_out,
                       uint16_t* dmin_out, int* ls, int* lm, int* q) {
  const int len = kQKK / subs;
  float scales[16], mins[16];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < subs; ++j) {
    fit_scale_min(x + len * j, len, nmax, &scales[j], &mins[j]);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  *d_out = f32_to_f16(max_scale / static_cast<float>(smax));
  *dmin_out = f32_to_f16(max_min / static_cast<float>(smax));
  const float d = f16_to_f32(*d_out), dmin = f16_to_f32(*dmin_out);
  for (int j = 0; j < subs; ++j) {
    ls[j] = d > 0.0f ? clamp_int(nearest_int(scales[j] / d), 0, smax) : 0;
    lm[j] = dmin > 0.0f ? clamp_int(nearest_int(mins[j] / dmin), 0, smax) : 0;
  }
  for (int j = 0; j < subs; ++j) {
    const float s = d * static_cast<float>(ls[j]), m = dmin * static_cast<float>(lm[j]);
    for (int i = 0; i < len; ++i)
      q[len * j + i] = s > 0.0f ? clamp_int(nearest_int((x[len * j + i] + m) / s), 0, nmax) : 0;
  }
}

}  // namespace

// (Where each quant's bits go: block_pack.cpp.)
void quantize_row_q4_k(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ4_K*>(vy);
  int q[kQKK], scales[8], mins[8];
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    uint16_t d, dmin;
    quantize_k_affine(x, 8, 15, 63, &d, &dmin, scales, mins, q);
    pack_q4_k(d, dmin, scales, mins, q, &y[i]);
  }
}
void dequantize_row_q4_k(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ4_K*>(vx);
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const float d = f16_to_f32(x[i].d), dmin = f16_to_f32(x[i].dmin);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      unpack_k_scale_min(x[i].scales, j, &sc, &m);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
      const uint8_t* qs = x[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) *y++ = dl * static_cast<float>((qs[l] >> shift) & 0xf) - ml;
    }
  }
}

void quantize_row_q5_k(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ5_K*>(vy);
  int q[kQKK], scales[8], mins[8];
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    uint16_t d, dmin;
    quantize_k_affine(x, 8, 31, 63, &d, &dmin, scales, mins, q);
    pack_q5_k(d, dmin, scales, mins, q, &y[i]);
  }
}
void dequantize_row_q5_k(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ5_K*>(vx);
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const float d = f16_to_f32(x[i].d), dmin = f16_to_f32(x[i].dmin);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      unpack_k_scale_min(x[i].scales, j, &sc, &m);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
      const uint8_t* qs = x[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) {
        const int q = ((qs[l] >> shift) & 0xf) | ((x[i].qh[l] >> j) & 1) << 4;
        *y++ = dl * static_cast<float>(q) - ml;
      }
    }
  }
}

// Q6_K: scales[j] scales elements 16j .. 16j + 15.
void quantize_row_q6_k(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ6_K*>(vy);
  int q[kQKK], ls[16];
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    const uint16_t d = quantize_k_symmetric(x, -32, 31, -127, 127, ls, q);
    for (int& v : q) v += 32;
    pack_q6_k(d, ls, q, &y[i]);
  }
}
void dequantize_row_q6_k(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ6_K*>(vx);
  for (int64_t i = 0; i < k / kQKK; ++i, y += kQKK) {
    const float d = f16_to_f32(x[i].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[i].ql + 64 * h;
      const uint8_t* qh = x[i].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {
            (ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4, (ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4,
            (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4, (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4};
        for (int g = 0; g < 4; ++g) {
          const int e = 128 * h + 32 * g + l;
          y[e] = d * static_cast<float>(x[i].scales[e / 16]) * static_cast<float>(q[g] - 32);
        }
      }
    }
  }
}

// Q8_K: float d = amax / 127, quants in [-127, 127], bsums of each 16.
void quantize_row_q8_k(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ8_K*>(vy);
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    const float amax = abs_max(x, kQKK);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = amax / 127.0f;
    for (int j = 0; j < kQKK; ++j)
      y[i].qs[j] = static_cast<int8_t>(clamp_int(nearest_int(x[j] * id), -127, 127));
    for (int j = 0; j < kQKK / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * j + l];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
  }
}
void dequantize_row_q8_k(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  for (int64_t i = 0; i < k / kQKK; ++i)
    for (int j = 0; j < kQKK; ++j) *y++ = x[i].d * static_cast<float>(x[i].qs[j]);
}

void quantize_row_q2_k(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ2_K*>(vy);
  int q[kQKK], scales[16], mins[16];
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    uint16_t d, dmin;
    quantize_k_affine(x, 16, 3, 15, &d, &dmin, scales, mins, q);
    pack_q2_k(d, dmin, scales, mins, q, &y[i]);
  }
}

// Q2_K: scales[16] with the 4-bit scale low and the 4-bit min high; in half h, bits 2g..2g+1
// of qs[32h + l] are element 128h + 32g + l.
void dequantize_row_q2_k(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ2_K*>(vx);
  for (int64_t i = 0; i < k / kQKK; ++i, y += kQKK) {
    const float d = f16_to_f32(x[i].d), dmin = f16_to_f32(x[i].dmin);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, g = (e % 128) / 32, l = e % 32;
      const uint8_t sc = x[i].scales[e / 16];
      const int q = (x[i].qs[32 * h + l] >> (2 * g)) & 3;
      y[e] = d * static_cast<float>(sc & 0xf) * static_cast<float>(q) -
             dmin * static_cast<float>(sc >> 4);
    }
  }
}

void quantize_row_q3_k(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ3_K*>(vy);
  int q[kQKK], ls[16];
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    const uint16_t d = quantize_k_symmetric(x, -4, 3, -32, 31, ls, q);
    for (int& v : q) v += 4;
    pack_q3_k(d, ls, q, &y[i]);
  }
}

// Q3_K: 2 low bits as Q2_K, the third bit of element 128h + 32g + l is bit 4h + g of hmask[l]
// (set means q - 0, clear q - 4); 16 6-bit scales (biased by 32) packed in 12 bytes.
void dequantize_row_q3_k(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ3_K*>(vx);
  for (int64_t i = 0; i < k / kQKK; ++i, y += kQKK) {
    const float d = f16_to_f32(x[i].d);
    const uint8_t* s = x[i].scales;
    int scales[16];
    for (int j = 0; j < 16; ++j) {
      const int low = j < 8 ? s[j] & 0xf : s[j - 8] >> 4;
      const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
      scales[j] = (low | high << 4) - 32;
    }
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, g = (e % 128) / 32, l = e % 32;
      const int q =
          ((x[i].qs[32 * h + l] >> (2 * g)) & 3) - ((x[i].hmask[l] >> (4 * h + g)) & 1 ? 0 : 4);
      y[e] = d * static_cast<float>(scales[e / 16]) * static_cast<float>(q);
    }
  }
}

}  // namespace tern
