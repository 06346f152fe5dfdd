// The weight quantizers' blocks (block_code.h): per type, block_fit's searches, then the scales
// as stored (f16, 6-bit, int8) refined against the quants they give.
#include "tern/quant/block_code.h"

#include <algorithm>
#include <cmath>

#include "tern/blocks/block_layouts.h"
#include "tern/blocks/block_pack.h"
#include "tern/blocks/iq4_fit.h"
#include "tern/blocks/mxfp4_fit.h"
#include "tern/core/half.h"
#include "tern/quant/block_fit.h"

namespace tern::quant {
namespace {

constexpr int kQK = 32;
constexpr int kQKK = 256;

float rounded_f16(float v, uint16_t* bits) {
  *bits = f32_to_f16(v);
  return f16_to_f32(*bits);
}

// Q4_0, Q5_0, Q8_0: x ≈ d · q.
void fit_symmetric_block(const float* x, const float* w, int qmin, int qmax, BlockCode* out) {
  const float d = rounded_f16(fit_symmetric(x, w, kQK, qmin, qmax), &out->d16);
  quantize_block(x, w, kQK, d, 0.0f, qmin, qmax, out->q);
}

// Q4_1, Q5_1: x ≈ d · q + m, q in [0, qmax].
void fit_affine_block(const float* x, const float* w, int qmax, BlockCode* out) {
  const AffineFit fit = fit_affine(x, w, kQK, qmax, false);
  const float d = rounded_f16(fit.scale, &out->d16), m = rounded_f16(fit.offset, &out->m16);
  quantize_block(x, w, kQK, d, m, 0, qmax, out->q);
}

// The least-squares scale for fixed quants and zero: Σ w (x − s (q − z))² is least at
// s = Σ w x (q − z) / Σ w (q − z)². Taken (rounded to f16) where it lowers the error, the quants
// rounded again under it.
void refit_zero_point_scale(const float* x, const float* w, int n, int qmax, int zero, float* best,
                            BlockCode* out) {
  float sxa = 0.0f, saa = 0.0f;
  for (int e = 0; e < n; ++e) {
    const auto a = static_cast<float>(out->q[e] - zero);
    sxa += w[e] * x[e] * a;
    saa += w[e] * a * a;
  }
  if (!(saa > 0.0f && sxa > 0.0f)) return;
  uint16_t s16;
  const float s2 = rounded_f16(sxa / saa, &s16);
  int q2[256];
  const float err = quantize_block(x, w, n, s2, -s2 * static_cast<float>(zero), 0, qmax, q2);
  if (err < *best) {
    *best = err;
    out->d16 = s16;
    out->bias = -s2 * static_cast<float>(zero);
    std::copy(q2, q2 + n, out->q);
  }
}

// The affine groups (INT4_G*, INT8_G*) as GPTQ and AWQ store them: x ≈ s · (q − z), f16 s and
// integer z in [min_zero, qmax]: the weighted least-squares fit, its zero rounded, then the
// scale refitted for that zero and the quants, where that lowers the error.
void fit_zero_point_group(const float* x, const float* w, int n, int qmax, int min_zero,
                          BlockCode* out) {
  const AffineFit fit = fit_affine(x, w, n, qmax, false);
  float scale = rounded_f16(fit.scale, &out->d16);
  if (scale <= 0.0f) scale = rounded_f16(f16_to_f32(1), &out->d16);  // a constant group
  const int zero = std::clamp(static_cast<int>(std::lround(-fit.offset / scale)), min_zero, qmax);
  out->bias = -scale * static_cast<float>(zero);
  float best = quantize_block(x, w, n, scale, out->bias, 0, qmax, out->q);
  refit_zero_point_scale(x, w, n, qmax, zero, &best, out);
}

// GPTQ's symmetric groups: z = (qmax + 1) / 2, so x ≈ s · (q − z) with q − z in
// [−z, qmax − z]. The scale stays positive (as GPTQ's is): a fit that would take the larger
// negative side by a negative scale is refitted on the symmetric range ±(qmax − z).
void fit_symmetric_zero_group(const float* x, const float* w, int n, int qmax, BlockCode* out) {
  const int zero = (qmax + 1) / 2;
  float s = fit_symmetric(x, w, n, -zero, qmax - zero);
  if (s < 0.0f) s = std::abs(fit_symmetric(x, w, n, zero - qmax, qmax - zero));
  float scale = rounded_f16(s, &out->d16);
  if (scale <= 0.0f) scale = rounded_f16(f16_to_f32(1), &out->d16);  // an all-zero group
  out->bias = -scale * static_cast<float>(zero);
  float best = quantize_block(x, w, n, scale, out->bias, 0, qmax, out->q);
  refit_zero_point_scale(x, w, n, qmax, zero, &best, out);
}

// MLX's groups: x ≈ s · q + b, s and b both stored as f16.
void fit_half_bias_group(const float* x, const float* w, int n, int qmax, BlockCode* out) {
  const AffineFit fit = fit_affine(x, w, n, qmax, false);
  float scale = rounded_f16(fit.scale, &out->d16);
  if (scale <= 0.0f) scale = rounded_f16(f16_to_f32(1), &out->d16);  // a constant group
  uint16_t b16;
  out->bias = rounded_f16(fit.offset, &b16);
  quantize_block(x, w, n, scale, out->bias, 0, qmax, out->q);
}

// The K types' affine super-blocks: Q4_K and Q5_K have 8 sub-blocks of 32 with 6-bit scales
// and mins, Q2_K 16 of 16 with 4-bit ones.
struct KAffineShape {
  int subs;  // sub-blocks per super-block
  int smax;  // the largest sub-block scale or min
  int len() const { return kQKK / subs; }
};

// The super-block's error for (d, dmin) with the given sub-block scales, quants to nearest.
float k_affine_error(const float* x, const float* w, KAffineShape shape, int qmax, float d,
                     float dmin, const int* ls, const int* lm, int* q) {
  const int len = shape.len();
  float err = 0.0f;
  for (int j = 0; j < shape.subs; ++j)
    err += quantize_block(x + len * j, w + len * j, len, d * static_cast<float>(ls[j]),
                          -dmin * static_cast<float>(lm[j]), 0, qmax, q + len * j);
  return err;
}

void fit_k_affine(const float* x, const float* w, KAffineShape shape, int qmax, BlockCode* out) {
  const int len = shape.len(), smax = shape.smax;
  float scales[16], mins[16], scale_weight[16], min_weight[16];
  int q[32];
  for (int j = 0; j < shape.subs; ++j) {
    const AffineFit fit = fit_affine(x + len * j, w + len * j, len, qmax, true);
    scales[j] = fit.scale;
    mins[j] = -fit.offset;
    // How much a sub-block's error grows with an error in its scale (Σ w q²) or min (Σ w):
    // the weights of the super-block scales' own fits.
    quantize_block(x + len * j, w + len * j, len, fit.scale, fit.offset, 0, qmax, q);
    scale_weight[j] = min_weight[j] = 0.0f;
    for (int i = 0; i < len; ++i) {
      scale_weight[j] += w[len * j + i] * static_cast<float>(q[i] * q[i]);
      min_weight[j] += w[len * j + i];
    }
  }
  float d = rounded_f16(fit_symmetric(scales, scale_weight, shape.subs, 0, smax), &out->d16);
  float dmin = rounded_f16(fit_symmetric(mins, min_weight, shape.subs, 0, smax), &out->m16);
  // Each sub-block's pair: the nearest, or a neighbour where that fits better (the scale
  // first, then the min for the best scale).
  int qs[32];
  for (int j = 0; j < shape.subs; ++j) {
    const float* xj = x + len * j;
    const float* wj = w + len * j;
    const int s0 = d > 0.0f ? std::clamp(static_cast<int>(std::lround(scales[j] / d)), 0, smax) : 0;
    const int m0 =
        dmin > 0.0f ? std::clamp(static_cast<int>(std::lround(mins[j] / dmin)), 0, smax) : 0;
    float best = -1.0f;
    auto consider = [&](int s, int m) {
      if (s < 0 || s > smax || m < 0 || m > smax) return;
      const float err = quantize_block(xj, wj, len, d * static_cast<float>(s),
                                       -dmin * static_cast<float>(m), 0, qmax, qs);
      if (best < 0.0f || err < best) {
        best = err;
        out->ls[j] = s;
        out->lm[j] = m;
        std::copy(qs, qs + len, out->q + len * j);
      }
    };
    for (int s = s0 - 1; s <= s0 + 1; ++s) consider(s, m0);
    const int s_best = out->ls[j];
    consider(s_best, m0 - 1);
    consider(s_best, m0 + 1);
  }
  // (d, dmin) refitted by least squares for these scales and quants: x ≈ d·A − dmin·B.
  float saa = 0, sab = 0, sbb = 0, sxa = 0, sxb = 0, err_before = 0;
  for (int e = 0; e < kQKK; ++e) {
    const float a = static_cast<float>(out->ls[e / len] * out->q[e]),
                b = static_cast<float>(out->lm[e / len]);
    saa += w[e] * a * a;
    sab += w[e] * a * b;
    sbb += w[e] * b * b;
    sxa += w[e] * x[e] * a;
    sxb += w[e] * x[e] * b;
    const float r = x[e] - (d * a - dmin * b);
    err_before += w[e] * r * r;
  }
  const float det = saa * sbb - sab * sab;
  if (det > 0.0f) {
    const float d2 = (sxa * sbb - sxb * sab) / det;
    const float dmin2 = (sxa * sab - sxb * saa) / det;
    if (d2 > 0.0f && dmin2 >= 0.0f) {
      uint16_t d16, dmin16;
      const float dr = rounded_f16(d2, &d16), dminr = rounded_f16(dmin2, &dmin16);
      int q2[kQKK];
      if (k_affine_error(x, w, shape, qmax, dr, dminr, out->ls, out->lm, q2) < err_before) {
        out->d16 = d16;
        out->m16 = dmin16;
        std::copy(q2, q2 + kQKK, out->q);
      }
    }
  }
}

// Q6_K and Q3_K: 16 sub-blocks of 16, x ≈ d · ls · q with ls in [smin, smax] (Q6_K: int8,
// [-127, 127]; Q3_K: 6 bits, [-32, 31]) and q in [qmin, qmax].
void fit_k_symmetric(const float* x, const float* w, int qmin, int qmax, int smin, int smax,
                     BlockCode* out) {
  float scales[16], scale_weight[16];
  int q[kQKK], ls[16];
  for (int j = 0; j < 16; ++j) {
    scales[j] = fit_symmetric(x + 16 * j, w + 16 * j, 16, qmin, qmax);
    quantize_block(x + 16 * j, w + 16 * j, 16, scales[j], 0.0f, qmin, qmax, q + 16 * j);
    scale_weight[j] = 0.0f;
    for (int l = 0; l < 16; ++l)
      scale_weight[j] += w[16 * j + l] * static_cast<float>(q[16 * j + l] * q[16 * j + l]);
  }
  uint16_t d16;
  float d = rounded_f16(fit_symmetric(scales, scale_weight, 16, smin, smax), &d16);
  int qs[16];
  float err_before = 0.0f;
  for (int j = 0; j < 16; ++j) {
    const int s0 =
        d != 0.0f ? std::clamp(static_cast<int>(std::lround(scales[j] / d)), smin, smax) : 0;
    float best = -1.0f;
    for (int s = std::max(s0 - 1, smin); s <= std::min(s0 + 1, smax); ++s) {
      const float err = quantize_block(x + 16 * j, w + 16 * j, 16, d * static_cast<float>(s), 0.0f,
                                       qmin, qmax, qs);
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
      err += quantize_block(x + 16 * j, w + 16 * j, 16, d2 * static_cast<float>(ls[j]), 0.0f, qmin,
                            qmax, q2 + 16 * j);
    if (err < err_before) {
      d16 = d2_16;
      std::copy(q2, q2 + kQKK, q);
    }
  }
  out->d16 = d16;
  std::copy(ls, ls + 16, out->ls);
  std::copy(q, q + kQKK, out->q);
}

}  // namespace

BlockFormat block_format(DType dtype) {
  switch (dtype) {
    case DType::Q8_0:
      return {kQK, -127, 127};
    case DType::Q4_0:
      return {kQK, -8, 7};
    case DType::Q5_0:
      return {kQK, -16, 15};
    case DType::Q4_1:
      return {kQK, 0, 15};
    case DType::Q5_1:
      return {kQK, 0, 31};
    case DType::Q4_K:
      return {kQKK, 0, 15};
    case DType::Q5_K:
      return {kQKK, 0, 31};
    case DType::Q6_K:
      return {kQKK, -32, 31};
    case DType::Q2_K:
      return {kQKK, 0, 3};
    case DType::Q3_K:
      return {kQKK, -4, 3};
    case DType::IQ4_NL:
      return {kQK, 0, 15, kIq4Levels};
    case DType::IQ4_XS:
      return {kQKK, 0, 15, kIq4Levels};
    case DType::MXFP4:
      return {kQK, 0, 15, kMxfp4Levels};
    default:
      if (const std::optional<AffineIntFormat> f = affine_int_format(dtype))
        return {f->group, 0, (1 << f->bits) - 1};
      return {};
  }
}

bool has_block_code(DType dtype) { return block_format(dtype).elems > 0; }

int BlockFormat::nearest(float x, float step, float offset) const {
  if (levels == nullptr) return nearest_quant(x, step, offset, qmin, qmax);
  if (levels == kMxfp4Levels) return nearest_mxfp4_level(x - offset, step);
  return nearest_iq4_level(step != 0.0f ? (x - offset) / step : 0.0f);
}

void fit_block(DType dtype, const float* x, const float* w, BlockCode* code, AffineRule rule) {
  const BlockFormat f = block_format(dtype);
  switch (dtype) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q5_0:
      return fit_symmetric_block(x, w, f.qmin, f.qmax, code);
    case DType::Q4_1:
    case DType::Q5_1:
      return fit_affine_block(x, w, f.qmax, code);
    case DType::Q4_K:
    case DType::Q5_K:
      return fit_k_affine(x, w, {.subs = 8, .smax = 63}, f.qmax, code);
    case DType::Q2_K:
      return fit_k_affine(x, w, {.subs = 16, .smax = 15}, f.qmax, code);
    case DType::Q6_K:
      return fit_k_symmetric(x, w, f.qmin, f.qmax, -127, 127, code);
    case DType::Q3_K:
      return fit_k_symmetric(x, w, f.qmin, f.qmax, -32, 31, code);
    case DType::IQ4_NL:
      return fit_iq4_nl(x, w, Iq4Fit::Search, &code->d16, code->q);
    case DType::IQ4_XS:
      return fit_iq4_xs(x, w, Iq4Fit::Search, &code->d16, code->ls, code->q);
    case DType::MXFP4: {
      uint8_t e;
      fit_mxfp4(x, w, Mxfp4Fit::Search, &e, code->q);
      code->d16 = e;
      return;
    }
    default:
      switch (rule) {
        case AffineRule::ZeroPoint:
          return fit_zero_point_group(x, w, f.elems, f.qmax, 0, code);
        case AffineRule::ZeroPointFromOne:
          return fit_zero_point_group(x, w, f.elems, f.qmax, 1, code);
        case AffineRule::SymmetricZero:
          return fit_symmetric_zero_group(x, w, f.elems, f.qmax, code);
        case AffineRule::HalfBias:
          return fit_half_bias_group(x, w, f.elems, f.qmax, code);
      }
  }
}

void block_grid(DType dtype, const BlockCode& code, float* step, float* offset) {
  const BlockFormat f = block_format(dtype);
  const float d = f16_to_f32(code.d16), m = f16_to_f32(code.m16);
  for (int e = 0; e < f.elems; ++e) {
    switch (dtype) {
      case DType::Q4_1:
      case DType::Q5_1:
        step[e] = d;
        offset[e] = m;
        break;
      case DType::Q4_K:
      case DType::Q5_K:
        step[e] = d * static_cast<float>(code.ls[e / 32]);
        offset[e] = -m * static_cast<float>(code.lm[e / 32]);
        break;
      case DType::Q2_K:
        step[e] = d * static_cast<float>(code.ls[e / 16]);
        offset[e] = -m * static_cast<float>(code.lm[e / 16]);
        break;
      case DType::Q6_K:
      case DType::Q3_K:
        step[e] = d * static_cast<float>(code.ls[e / 16]);
        offset[e] = 0.0f;
        break;
      case DType::IQ4_XS:
        step[e] = d * static_cast<float>(code.ls[e / 32]);
        offset[e] = 0.0f;
        break;
      case DType::MXFP4:
        step[e] = mxfp4_scale(static_cast<uint8_t>(code.d16));
        offset[e] = 0.0f;
        break;
      default:  // Q8_0, Q4_0, Q5_0, IQ4_NL, the affine groups
        step[e] = d;
        offset[e] = affine_int_format(dtype) ? code.bias : 0.0f;
        break;
    }
  }
}

void pack_block(DType dtype, const BlockCode& code, void* y) {
  // Stored quants are unsigned (bias added) except Q8_0's.
  int biased[kQKK];
  const BlockFormat f = block_format(dtype);
  if (affine_int_format(dtype)) {
    const float scale = f16_to_f32(code.d16);
    with_affine_block<bool>(dtype, [&]<class B>() {
      auto& block = *static_cast<B*>(y);
      block.scale = scale;
      block.bias = code.bias;
      for (int e = 0; e < f.elems; ++e) set_affine_code(block, e, code.q[e]);
      return true;
    });
    return;
  }
  const int bias = dtype == DType::Q8_0 ? 0 : -f.qmin;
  for (int e = 0; e < f.elems; ++e) biased[e] = code.q[e] + bias;
  switch (dtype) {
    case DType::Q8_0:
      return pack_q8_0(code.d16, biased, static_cast<BlockQ8_0*>(y));
    case DType::Q4_0:
      return pack_q4_0(code.d16, biased, static_cast<BlockQ4_0*>(y));
    case DType::Q5_0:
      return pack_q5_0(code.d16, biased, static_cast<BlockQ5_0*>(y));
    case DType::Q4_1:
      return pack_q4_1(code.d16, code.m16, biased, static_cast<BlockQ4_1*>(y));
    case DType::Q5_1:
      return pack_q5_1(code.d16, code.m16, biased, static_cast<BlockQ5_1*>(y));
    case DType::Q4_K:
      return pack_q4_k(code.d16, code.m16, code.ls, code.lm, biased, static_cast<BlockQ4_K*>(y));
    case DType::Q5_K:
      return pack_q5_k(code.d16, code.m16, code.ls, code.lm, biased, static_cast<BlockQ5_K*>(y));
    case DType::Q2_K:
      return pack_q2_k(code.d16, code.m16, code.ls, code.lm, biased, static_cast<BlockQ2_K*>(y));
    case DType::Q3_K:
      return pack_q3_k(code.d16, code.ls, biased, static_cast<BlockQ3_K*>(y));
    case DType::IQ4_NL:
      return pack_iq4_nl(code.d16, biased, static_cast<BlockIq4Nl*>(y));
    case DType::IQ4_XS:
      return pack_iq4_xs(code.d16, code.ls, biased, static_cast<BlockIq4Xs*>(y));
    case DType::MXFP4:
      return pack_mxfp4(static_cast<uint8_t>(code.d16), biased, static_cast<BlockMxfp4*>(y));
    default:
      return pack_q6_k(code.d16, code.ls, biased, static_cast<BlockQ6_K*>(y));
  }
}

}  // namespace tern::quant
