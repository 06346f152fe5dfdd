// The weight quantizers (weight_quantizer.h): per type, block_fit's searches, then the scales
// as stored (f16, 6-bit, int8) refined against the quants they give.
#include "tern/quant/weight_quantizer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/quant_pack.h"
#include "tern/kernels/cpu/quantize.h"
#include "tern/quant/block_fit.h"

namespace tern::quant {
namespace {

using cpu::kQK;
using cpu::kQKK;

float rounded_f16(float v, uint16_t* bits) {
  *bits = f32_to_f16(v);
  return f16_to_f32(*bits);
}

// Q4_0, Q5_0, Q8_0: x ≈ d · q, q in [qmin, qmax], stored with `bias` added.
template <typename Block, typename Pack>
void quantize_symmetric_row(const float* x, const float* w, int64_t k, int qmin, int qmax, int bias,
                            Block* y, Pack pack) {
  int q[kQK];
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK, w += kQK) {
    uint16_t d16;
    const float d = rounded_f16(fit_symmetric(x, w, kQK, qmin, qmax), &d16);
    quantize_block(x, w, kQK, d, 0.0f, qmin, qmax, q);
    for (int& v : q) v += bias;
    pack(d16, q, &y[b]);
  }
}

// Q4_1, Q5_1: x ≈ d · q + m, q in [0, qmax].
template <typename Block, typename Pack>
void quantize_affine_row(const float* x, const float* w, int64_t k, int qmax, Block* y, Pack pack) {
  int q[kQK];
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK, w += kQK) {
    const AffineFit fit = fit_affine(x, w, kQK, qmax, false);
    uint16_t d16, m16;
    const float d = rounded_f16(fit.scale, &d16), m = rounded_f16(fit.offset, &m16);
    quantize_block(x, w, kQK, d, m, 0, qmax, q);
    pack(d16, m16, q, &y[b]);
  }
}

// The 6-bit sub-block scales and mins of a Q4_K / Q5_K super-block, and its quants.
struct KAffineBlock {
  uint16_t d16 = 0, dmin16 = 0;
  int ls[8] = {}, lm[8] = {};
  int q[kQKK] = {};
};

// The super-block's error for (d, dmin) with the given 6-bit scales, quants to nearest.
float k_affine_error(const float* x, const float* w, int qmax, float d, float dmin, const int* ls,
                     const int* lm, int* q) {
  float err = 0.0f;
  for (int j = 0; j < 8; ++j)
    err += quantize_block(x + 32 * j, w + 32 * j, 32, d * static_cast<float>(ls[j]),
                          -dmin * static_cast<float>(lm[j]), 0, qmax, q + 32 * j);
  return err;
}

void fit_k_affine(const float* x, const float* w, int qmax, KAffineBlock* out) {
  float scales[8], mins[8], scale_weight[8], min_weight[8];
  int q[32];
  for (int j = 0; j < 8; ++j) {
    const AffineFit fit = fit_affine(x + 32 * j, w + 32 * j, 32, qmax, true);
    scales[j] = fit.scale;
    mins[j] = -fit.offset;
    // How much a sub-block's error grows with an error in its scale (Σ w q²) or min (Σ w):
    // the weights of the super-block scales' own fits.
    quantize_block(x + 32 * j, w + 32 * j, 32, fit.scale, fit.offset, 0, qmax, q);
    scale_weight[j] = min_weight[j] = 0.0f;
    for (int i = 0; i < 32; ++i) {
      scale_weight[j] += w[32 * j + i] * static_cast<float>(q[i] * q[i]);
      min_weight[j] += w[32 * j + i];
    }
  }
  float d = rounded_f16(fit_symmetric(scales, scale_weight, 8, 0, 63), &out->d16);
  float dmin = rounded_f16(fit_symmetric(mins, min_weight, 8, 0, 63), &out->dmin16);
  // Each sub-block's 6-bit pair: the nearest, or a neighbour where that fits better (the scale
  // first, then the min for the best scale).
  int qs[32];
  for (int j = 0; j < 8; ++j) {
    const float* xj = x + 32 * j;
    const float* wj = w + 32 * j;
    const int s0 = d > 0.0f ? std::clamp(static_cast<int>(std::lround(scales[j] / d)), 0, 63) : 0;
    const int m0 = dmin > 0.0f ? std::clamp(static_cast<int>(std::lround(mins[j] / dmin)), 0, 63) : 0;
    float best = -1.0f;
    auto consider = [&](int s, int m) {
      if (s < 0 || s > 63 || m < 0 || m > 63) return;
      const float err = quantize_block(xj, wj, 32, d * static_cast<float>(s), -dmin * static_cast<float>(m), 0, qmax, qs);
      if (best < 0.0f || err < best) {
        best = err;
        out->ls[j] = s;
        out->lm[j] = m;
        std::copy(qs, qs + 32, out->q + 32 * j);
      }
    };
    for (int s = s0 - 1; s <= s0 + 1; ++s) consider(s, m0);
    const int s_best = out->ls[j];
    consider(s_best, m0 - 1);
    consider(s_best, m0 + 1);
  }
  // (d, dmin) refitted by least squares for these scales and quants: x ≈ d·A − dmin·B.
  float saa = 0, sab = 0, sbb = 0, sxa = 0, sxb = 0, err_before = 0;
  for (int j = 0; j < 8; ++j) {
    for (int i = 0; i < 32; ++i) {
      const int e = 32 * j + i;
      const float a = static_cast<float>(out->ls[j] * out->q[e]), b = static_cast<float>(out->lm[j]);
      saa += w[e] * a * a;
      sab += w[e] * a * b;
      sbb += w[e] * b * b;
      sxa += w[e] * x[e] * a;
      sxb += w[e] * x[e] * b;
      const float r = x[e] - (d * a - dmin * b);
      err_before += w[e] * r * r;
    }
  }
  const float det = saa * sbb - sab * sab;
  if (det > 0.0f) {
    const float d2 = (sxa * sbb - sxb * sab) / det;
    const float dmin2 = (sxa * sab - sxb * saa) / det;
    if (d2 > 0.0f && dmin2 >= 0.0f) {
      uint16_t d16, dmin16;
      const float dr = rounded_f16(d2, &d16), dminr = rounded_f16(dmin2, &dmin16);
      int q2[kQKK];
      if (k_affine_error(x, w, qmax, dr, dminr, out->ls, out->lm, q2) < err_before) {
        out->d16 = d16;
        out->dmin16 = dmin16;
        std::copy(q2, q2 + kQKK, out->q);
      }
    }
  }
}

template <typename Block, typename Pack>
void quantize_k_affine_row(const float* x, const float* w, int64_t k, int qmax, Block* y, Pack pack) {
  KAffineBlock b;
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK, w += kQKK) {
    fit_k_affine(x, w, qmax, &b);
    pack(b.d16, b.dmin16, b.ls, b.lm, b.q, &y[i]);
  }
}

// Q6_K: 16 sub-blocks of 16, x ≈ d · ls · q with ls int8 and q in [-32, 31].
void quantize_q6_k_row(const float* x, const float* w, int64_t k, cpu::BlockQ6_K* y) {
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK, w += kQKK) {
    float scales[16], scale_weight[16];
    int q[kQKK], ls[16];
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_symmetric(x + 16 * j, w + 16 * j, 16, -32, 31);
      quantize_block(x + 16 * j, w + 16 * j, 16, scales[j], 0.0f, -32, 31, q + 16 * j);
      scale_weight[j] = 0.0f;
      for (int l = 0; l < 16; ++l) scale_weight[j] += w[16 * j + l] * static_cast<float>(q[16 * j + l] * q[16 * j + l]);
    }
    uint16_t d16;
    float d = rounded_f16(fit_symmetric(scales, scale_weight, 16, -127, 127), &d16);
    int qs[16];
    float err_before = 0.0f;
    for (int j = 0; j < 16; ++j) {
      const int s0 = d != 0.0f ? std::clamp(static_cast<int>(std::lround(scales[j] / d)), -127, 127) : 0;
      float best = -1.0f;
      for (int s = std::max(s0 - 1, -127); s <= std::min(s0 + 1, 127); ++s) {
        const float err = quantize_block(x + 16 * j, w + 16 * j, 16, d * static_cast<float>(s), 0.0f, -32, 31, qs);
        if (best < 0.0f || err < best) {
          best = err;
          ls[j] = s;
          std::copy(qs, qs + 16, q + 16 * j);
        }
      }
      err_before += best;
    }
    // d refitted for these scales and quants.
    float saa = 0.0f, sxa = 0.0f;
    for (int e = 0; e < kQKK; ++e) {
      const float a = static_cast<float>(ls[e / 16] * q[e]);
      saa += w[e] * a * a;
      sxa += w[e] * x[e] * a;
    }
    if (saa > 0.0f) {
      uint16_t d2_16;
      const float d2 = rounded_f16(sxa / saa, &d2_16);
      int q2[kQKK];
      float err = 0.0f;
      for (int j = 0; j < 16; ++j)
        err += quantize_block(x + 16 * j, w + 16 * j, 16, d2 * static_cast<float>(ls[j]), 0.0f, -32, 31, q2 + 16 * j);
      if (err < err_before) {
        d16 = d2_16;
        std::copy(q2, q2 + kQKK, q);
      }
    }
    for (int& v : q) v += 32;
    cpu::pack_q6_k(d16, ls, q, &y[i]);
  }
}

// The block weights: the importances, with equal ones for a block where they are all 0 (a
// column never activated in the calibration text says nothing about its block's other columns).
void block_weights(const float* importance, int64_t k, int block, std::vector<float>& w) {
  w.assign(static_cast<size_t>(k), 1.0f);
  if (importance == nullptr) return;
  for (int64_t b = 0; b < k; b += block) {
    float sum = 0.0f;
    for (int i = 0; i < block; ++i) sum += importance[b + i];
    if (sum > 0.0f) std::copy(importance + b, importance + b + block, w.begin() + b);
  }
}

void check_row(DType dtype, int64_t k) {
  if (!has_weight_quantizer(dtype))
    throw Error("no weight quantizer for type " + std::string(dtype_name(dtype)));
  const int64_t block = dtype_traits(dtype).block_elems;
  if (k <= 0 || k % block != 0)
    throw Error("row of " + std::to_string(k) + " elements is not a whole number of " +
                std::string(dtype_name(dtype)) + " blocks of " + std::to_string(block));
}

void quantize_checked(DType dtype, const float* x, void* y, int64_t k, const float* importance,
                      std::vector<float>& w) {
  switch (dtype) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      cpu::quantize_row(dtype, x, y, k);
      return;
    default:
      break;
  }
  block_weights(importance, k, static_cast<int>(dtype_traits(dtype).block_elems), w);
  switch (dtype) {
    case DType::Q4_0:
      return quantize_symmetric_row(x, w.data(), k, -8, 7, 8, static_cast<cpu::BlockQ4_0*>(y), cpu::pack_q4_0);
    case DType::Q5_0:
      return quantize_symmetric_row(x, w.data(), k, -16, 15, 16, static_cast<cpu::BlockQ5_0*>(y), cpu::pack_q5_0);
    case DType::Q8_0:
      return quantize_symmetric_row(x, w.data(), k, -127, 127, 0, static_cast<cpu::BlockQ8_0*>(y), cpu::pack_q8_0);
    case DType::Q4_1:
      return quantize_affine_row(x, w.data(), k, 15, static_cast<cpu::BlockQ4_1*>(y), cpu::pack_q4_1);
    case DType::Q5_1:
      return quantize_affine_row(x, w.data(), k, 31, static_cast<cpu::BlockQ5_1*>(y), cpu::pack_q5_1);
    case DType::Q4_K:
      return quantize_k_affine_row(x, w.data(), k, 15, static_cast<cpu::BlockQ4_K*>(y), cpu::pack_q4_k);
    case DType::Q5_K:
      return quantize_k_affine_row(x, w.data(), k, 31, static_cast<cpu::BlockQ5_K*>(y), cpu::pack_q5_k);
    case DType::Q6_K:
      return quantize_q6_k_row(x, w.data(), k, static_cast<cpu::BlockQ6_K*>(y));
    default:
      throw Error("no weight quantizer for type " + std::string(dtype_name(dtype)));
  }
}

}  // namespace

bool has_weight_quantizer(DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

void quantize_weight_row(DType dtype, const float* x, void* y, int64_t k, const float* importance) {
  check_row(dtype, k);
  std::vector<float> w;
  quantize_checked(dtype, x, y, k, importance, w);
}

void quantize_weight_rows(DType dtype, const float* x, void* y, int64_t rows, int64_t k,
                          const float* importance) {
  check_row(dtype, k);
  const auto row_bytes = static_cast<int64_t>(*dtype_bytes(dtype, static_cast<uint64_t>(k)));
#pragma omp parallel
  {
    std::vector<float> w;
#pragma omp for schedule(dynamic, 8)
    for (int64_t r = 0; r < rows; ++r)
      quantize_checked(dtype, x + r * k, static_cast<uint8_t*>(y) + r * row_bytes, k, importance, w);
  }
}

double weighted_error(DType dtype, const float* x, const void* y, int64_t k, const float* importance) {
  std::vector<float> back(static_cast<size_t>(k));
  cpu::dequantize_row(dtype, y, back.data(), k);
  double err = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    const double e = static_cast<double>(x[i]) - back[static_cast<size_t>(i)];
    err += (importance != nullptr ? importance[i] : 1.0) * e * e;
  }
  return err;
}

}  // namespace tern::quant
