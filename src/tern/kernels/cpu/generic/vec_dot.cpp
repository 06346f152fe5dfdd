// The scalar reference dots: they define the arithmetic every SIMD kernel reproduces. Per
// block (or K-type sub-block) an exact integer dot, then one float multiply-add per block by
// the product of the scales, accumulated in block order. SIMD kernels keep the integer parts
// exact and may differ only in the order of the float accumulation.
#include <cmath>
#include <type_traits>

#include "tern/blocks/block_layouts.h"
#include "tern/blocks/k_scales.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/ops/row_ops.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// Quant j and j + 16 of a 32-element 4/5-bit block (j < 16). The loops below go over the 16
// bytes rather than the 32 elements: GCC 12.2 at -O2 with AVX-512 miscompiles the
// vectorized form of `j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4` over j < 32.
uint32_t q5_high_bits(const uint8_t* qh) {
  return qh[0] | qh[1] << 8 | qh[2] << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

// Σ (q − offset) · a over one block of 5-bit quants (Q5_0: offset 16; Q5_1: 0, its min is
// applied through the activation sum).
template <typename Block>
int q5_block_dot(const Block& w, const int8_t* a, int offset) {
  const uint32_t qh = q5_high_bits(w.qh);
  int sumi = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = (w.qs[j] & 0xf) | ((qh >> j) & 1) << 4;
    const int hi = (w.qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
    sumi += (lo - offset) * a[j] + (hi - offset) * a[j + 16];
  }
  return sumi;
}

float dot_q4_0(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ4_0*>(vw);
  const auto* a = static_cast<const BlockQ8_0*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j)
      sumi += ((w[i].qs[j] & 0xf) - 8) * a[i].qs[j] + ((w[i].qs[j] >> 4) - 8) * a[i].qs[j + 16];
    sum += static_cast<float>(sumi) * (f16_to_f32(w[i].d) * f16_to_f32(a[i].d));
  }
  return sum;
}

// The weight's offset m multiplies the sum of the activation block, which Q8_1 carries as s.
float dot_q4_1(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ4_1*>(vw);
  const auto* a = static_cast<const BlockQ8_1*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j)
      sumi += (w[i].qs[j] & 0xf) * a[i].qs[j] + (w[i].qs[j] >> 4) * a[i].qs[j + 16];
    sum += static_cast<float>(sumi) * (f16_to_f32(w[i].d) * f16_to_f32(a[i].d)) +
           f16_to_f32(w[i].m) * f16_to_f32(a[i].s);
  }
  return sum;
}

float dot_q5_0(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ5_0*>(vw);
  const auto* a = static_cast<const BlockQ8_0*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQK; ++i) {
    const int sumi = q5_block_dot(w[i], a[i].qs, 16);
    sum += static_cast<float>(sumi) * (f16_to_f32(w[i].d) * f16_to_f32(a[i].d));
  }
  return sum;
}

float dot_q5_1(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ5_1*>(vw);
  const auto* a = static_cast<const BlockQ8_1*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQK; ++i) {
    const int sumi = q5_block_dot(w[i], a[i].qs, 0);
    sum += static_cast<float>(sumi) * (f16_to_f32(w[i].d) * f16_to_f32(a[i].d)) +
           f16_to_f32(w[i].m) * f16_to_f32(a[i].s);
  }
  return sum;
}

float dot_q8_0(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ8_0*>(vw);
  const auto* a = static_cast<const BlockQ8_0*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += w[i].qs[j] * a[i].qs[j];
    sum += static_cast<float>(sumi) * (f16_to_f32(w[i].d) * f16_to_f32(a[i].d));
  }
  return sum;
}

// Q4_K / Q5_K: per super-block, the scaled integer dot and the mins term (mins times the
// activation's sums, from bsums), each exact in int32, then two float multiply-adds.
template <bool kFiveBit>
float dot_k_affine(int64_t k, const void* vw, const void* va) {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;
  const auto* w = static_cast<const Block*>(vw);
  const auto* a = static_cast<const BlockQ8_K*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    int sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      unpack_k_scale_min(w[i].scales, j, &sc, &m);
      const uint8_t* qs = w[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      int dot = 0;
      for (int l = 0; l < 32; ++l) {
        int q = (qs[l] >> shift) & 0xf;
        if constexpr (kFiveBit) q |= ((w[i].qh[l] >> j) & 1) << 4;
        dot += q * a[i].qs[32 * j + l];
      }
      sumi += sc * dot;
      summ += m * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
    }
    sum += (a[i].d * f16_to_f32(w[i].d)) * static_cast<float>(sumi) -
           (a[i].d * f16_to_f32(w[i].dmin)) * static_cast<float>(summ);
  }
  return sum;
}

// Q2_K: per super-block, as Q4_K with 16 sub-blocks of 16 and 4-bit scales and mins (each
// sub-block's min times its activation sum, bsums[j]).
float dot_q2_k(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ2_K*>(vw);
  const auto* a = static_cast<const BlockQ8_K*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    int sumi = 0, summ = 0;
    for (int j = 0; j < 16; ++j) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * j + l;  // element index in the super-block
        const int q = (w[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        dot += q * a[i].qs[e];
      }
      sumi += (w[i].scales[j] & 0xf) * dot;
      summ += (w[i].scales[j] >> 4) * a[i].bsums[j];
    }
    sum += (a[i].d * f16_to_f32(w[i].d)) * static_cast<float>(sumi) -
           (a[i].d * f16_to_f32(w[i].dmin)) * static_cast<float>(summ);
  }
  return sum;
}

// Q3_K: per super-block, as Q6_K with 3-bit quants (q − 4, the third bit clear meaning − 4)
// and 6-bit scales (biased by 32).
float dot_q3_k(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ3_K*>(vw);
  const auto* a = static_cast<const BlockQ8_K*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const uint8_t* s = w[i].scales;
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      const int low = j < 8 ? s[j] & 0xf : s[j - 8] >> 4;
      const int scale = (low | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
      int dot = 0;
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * j + l;
        const int h = e / 128, g = (e % 128) / 32, r = e % 32;
        const int q =
            ((w[i].qs[32 * h + r] >> (2 * g)) & 3) - ((w[i].hmask[r] >> (4 * h + g)) & 1 ? 0 : 4);
        dot += q * a[i].qs[e];
      }
      sumi += scale * dot;
    }
    sum += (a[i].d * f16_to_f32(w[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

float dot_q6_k(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ6_K*>(vw);
  const auto* a = static_cast<const BlockQ8_K*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * j + l;  // element index in the super-block
        const int h = e / 128, g = (e % 128) / 32, r = e % 32;
        const uint8_t ql = w[i].ql[64 * h + 32 * (g % 2) + r];
        const int q =
            ((g < 2 ? ql & 0xf : ql >> 4) | ((w[i].qh[32 * h + r] >> (2 * g)) & 3) << 4) - 32;
        dot += q * a[i].qs[e];
      }
      sumi += w[i].scales[j] * dot;
    }
    sum += (a[i].d * f16_to_f32(w[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

// Σ L[q] · a over one IQ4 group of 32 (qs as Q4_0's nibbles), exact.
int iq4_group_dot(const uint8_t* qs, const int8_t* a) {
  int sumi = 0;
  for (int j = 0; j < kQK / 2; ++j)
    sumi += kIq4Levels[qs[j] & 0xf] * a[j] + kIq4Levels[qs[j] >> 4] * a[j + 16];
  return sumi;
}

// The lookup blocks of 32 against Q8_0: an element is scale · levels[q], q as Q4_0's nibbles.
inline const int8_t* block_levels(const BlockIq4Nl&) { return kIq4Levels; }
inline float block_scale(const BlockIq4Nl& w) { return f16_to_f32(w.d); }
inline const int8_t* block_levels(const BlockMxfp4&) { return kMxfp4Levels; }
inline float block_scale(const BlockMxfp4& w) { return mxfp4_scale(w.e); }

// IQ4_NL and MXFP4: the arithmetic of two 8-lane vectors, which the SIMD kernels reproduce bit
// for bit (two, so that consecutive blocks' multiply-adds do not wait on each other): lane
// 8 (b % 2) + m takes, from block b in order, the exact integer sum over its elements 4m..4m+3
// times scale(w) · f16(a.d) by one fused multiply-add; then the 16 lanes are summed lane j +
// lane j + 8, then + 4, + 2, + 1. (MXFP4's scale is a power of two, so the product of the
// scales is exact unless it falls below the normal floats.)
template <typename Block>
float dot_lookup(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const Block*>(vw);
  const auto* a = static_cast<const BlockQ8_0*>(va);
  constexpr int kLanes = 16;
  float lane[kLanes] = {};
  for (int64_t b = 0; b < k / kQK; ++b) {
    const int8_t* levels = block_levels(w[b]);
    const float scale = block_scale(w[b]) * f16_to_f32(a[b].d);
    for (int m = 0; m < 8; ++m) {
      int sumi = 0;
      for (int e = 4 * m; e < 4 * m + 4; ++e) {
        const int q = e < kQK / 2 ? w[b].qs[e] & 0xf : w[b].qs[e - kQK / 2] >> 4;
        sumi += levels[q] * a[b].qs[e];
      }
      float& l = lane[8 * (b % 2) + m];
      l = std::fma(static_cast<float>(sumi), scale, l);
    }
  }
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lane[j] = lane[j] + lane[j + width];
  return lane[0];
}

// IQ4_XS: per super-block, as Q3_K: Σ_j (ls_j − 32) · Σ L[q] · a exact in int32, then one float
// step.
float dot_iq4_xs(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockIq4Xs*>(vw);
  const auto* a = static_cast<const BlockQ8_K*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQKK / kQK; ++j)
      sumi += (iq4_xs_scale(w[i], j) - 32) * iq4_group_dot(w[i].qs + 16 * j, a[i].qs + kQK * j);
    sum += (a[i].d * f16_to_f32(w[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

// IQ3_XXS, IQ3_S and the IQ2 types: per super-block, as IQ4_XS: Σ_j Σ_h (2 ls + 1) · Σ ±m · a
// over each half sub-block of 16 exact in int32 (|Σ| < 16 · 31 · 16 · 62 · 127; IQ3's halves
// share their scale, so its sums are Σ_j (2 ls_j + 1) · Σ ±m · a's), then one float step; the
// row's sum then times lattice_factor (IQ3_XXS's quarter, the IQ2 types' eighth: exact). m < 64
// and a > −128, so SIMD pairs of m · a fit int16.
template <typename Block>
float dot_lattice_signs(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const Block*>(vw);
  const auto* a = static_cast<const BlockQ8_K*>(va);
  // IQ3's grid entries hold 4 magnitudes, IQ2's 8.
  constexpr int kPerEntry = sizeof(lattice_grid(w[0], 0, 0));
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQKK / kQK; ++j) {
      const uint32_t signs = lattice_signs(w[i], j);
      const int8_t* x = a[i].qs + kQK * j;
      for (int h = 0; h < 2; ++h) {
        int dot = 0;
        for (int e = 16 * h; e < 16 * h + 16; ++e) {
          const int m = static_cast<int>(
              (lattice_grid(w[i], j, e / kPerEntry) >> (8 * (e % kPerEntry))) & 0xff);
          dot += ((signs >> e) & 1 ? -m : m) * x[e];
        }
        sumi += lattice_scale(w[i], j, h) * dot;
      }
    }
    sum += (a[i].d * f16_to_f32(w[i].d)) * static_cast<float>(sumi);
  }
  return lattice_factor(w) * sum;
}

// IQ1_S and IQ1_M: d · (2 ls + 1) · (g + δ / 8) is d / 8 · (2 ls + 1) · (8 g + δ), so per
// super-block Σ (2 ls + 1) · Σ (8 g + δ) · a (ggml's 8 Σ ls · Σ g · a and Σ ls · δ · Σ a in one)
// is exact in int32 (|Σ| ≤ 16 · 15 · 16 · 9 · 127 < 2^23, so exact as a float too), then one
// float step; the row's sum then times 1/8 (exact). |8 g + δ| ≤ 9, so SIMD pairs fit int16.
template <typename Block>
float dot_iq1(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const Block*>(vw);
  const auto* a = static_cast<const BlockQ8_K*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQKK / kQK; ++j) {
      for (int l = 0; l < 4; ++l) {
        const int8_t* x = a[i].qs + kQK * j + 8 * l;
        const int index = iq1_index(w[i], j, l), delta = iq1_delta(w[i], j, l);
        int dot = 0;
        for (int e = 0; e < 8; ++e) dot += (8 * iq1_grid_value(index, e) + delta) * x[e];
        sumi += iq1_scale(w[i], j, l / 2) * dot;
      }
    }
    sum += (a[i].d * f16_to_f32(iq1_d_bits(w[i]))) * static_cast<float>(sumi);
  }
  return lattice_factor(w) * sum;
}

float dot_f32(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const float*>(vw);
  const auto* a = static_cast<const float*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) sum += w[i] * a[i];
  return sum;
}
// F16 weights take f32 activations: widening the weights is exact, so the products are.
float dot_f16(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const float*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) sum += f16_to_f32(w[i]) * a[i];
  return sum;
}
float dot_bf16(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const uint16_t*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) sum += bf16_to_f32(w[i]) * bf16_to_f32(a[i]);
  return sum;
}

}  // namespace

VecDotFn scalar_vec_dot(DType weight) {
  switch (weight) {
    case DType::F32:
      return dot_f32;
    case DType::F16:
      return dot_f16;
    case DType::BF16:
      return dot_bf16;
    case DType::Q4_0:
      return dot_q4_0;
    case DType::Q4_1:
      return dot_q4_1;
    case DType::Q5_0:
      return dot_q5_0;
    case DType::Q5_1:
      return dot_q5_1;
    case DType::Q8_0:
      return dot_q8_0;
    case DType::Q2_K:
      return dot_q2_k;
    case DType::Q3_K:
      return dot_q3_k;
    case DType::Q4_K:
      return dot_k_affine<false>;
    case DType::Q5_K:
      return dot_k_affine<true>;
    case DType::Q6_K:
      return dot_q6_k;
    case DType::IQ4_NL:
      return dot_lookup<BlockIq4Nl>;
    case DType::IQ4_XS:
      return dot_iq4_xs;
    case DType::MXFP4:
      return dot_lookup<BlockMxfp4>;
    case DType::IQ3_XXS:
      return dot_lattice_signs<BlockIq3Xxs>;
    case DType::IQ3_S:
      return dot_lattice_signs<BlockIq3S>;
    case DType::IQ2_XXS:
      return dot_lattice_signs<BlockIq2Xxs>;
    case DType::IQ2_XS:
      return dot_lattice_signs<BlockIq2Xs>;
    case DType::IQ2_S:
      return dot_lattice_signs<BlockIq2S>;
    case DType::IQ1_S:
      return dot_iq1<BlockIq1S>;
    case DType::IQ1_M:
      return dot_iq1<BlockIq1M>;
    default:
      return scalar_vec_dot_affine(weight);
  }
}

namespace {

// The 16-bit activations are plain conversions: the row converters of row_ops.h (SIMD,
// bit-identical to their scalar twins and to blocks/quantize_row.h's rows) do them.
void quantize_activation_f16(const float* x, void* y, int64_t k) {
  f32_to_f16_row(x, static_cast<uint16_t*>(y), k);
}
void quantize_activation_bf16(const float* x, void* y, int64_t k) {
  f32_to_bf16_row(x, static_cast<uint16_t*>(y), k);
}

}  // namespace

// The other activation formats are blocks/quantize_row.h's row quantizers: one definition of
// each format.
QuantizeRowFn scalar_quantize_activation(DType activation) {
  switch (activation) {
    case DType::F16:
      return quantize_activation_f16;
    case DType::BF16:
      return quantize_activation_bf16;
    case DType::F32:
    case DType::Q8_0:
    case DType::Q8_1:
    case DType::Q8_K:
      return quantize_fn(activation);
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
