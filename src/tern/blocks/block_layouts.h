// ggml's quantized block layouts, byte for byte, so GGUF tensors are used in place.
// Scales are f16 bit patterns (tern/core/half.h) except Q8_K's f32 and MXFP4's exponent.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "tern/blocks/iq1_grids.h"
#include "tern/blocks/iq2_grids.h"
#include "tern/blocks/iq3_grids.h"
#include "tern/blocks/lattice_signs.h"
#include "tern/core/dtype.h"

namespace tern {

constexpr int kQK = 32;           // elements per block of the 32-element types
constexpr int kQKK = 256;         // elements per super-block of the K types
constexpr int kKScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K / Q5_K

// x = (q - 8) * d; element j in the low nibble of qs[j], element j + 16 in the high nibble.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// x = q * d + m
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
// x = (q - 16) * d; q = nibble | (bit j of qh) << 4
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// Activations for Q4_1 / Q5_1 weights: s = d * sum(qs) carries the offset term.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
// tern's affine groups (INT4_G*, INT8_G*: the groups of GPTQ, AWQ and MLX checkpoints, which
// the loader repacks into them): x = fma(scale, q, bias) over kGroup elements, q unsigned in
// kBits bits. A checkpoint's s · (q − z) is bias = −s · z, exact in f32 for an f16 s and an
// integer z < 256, and MLX's f16/bf16 scale and bias are exact in f32: no group loses a bit.
// 4 bits: each 32 elements of the group as Q4_0's qs (element j in the low nibble of byte j,
// element j + 16 in its high nibble); 8 bits: a byte per element.
template <int kBits, int kGroup>
struct BlockAffine {
  static constexpr int kBitsPerCode = kBits;
  static constexpr int kElems = kGroup;
  float scale;
  float bias;
  uint8_t qs[kGroup * kBits / 8];
};

// Code i (< kGroup) of an affine block.
template <int kBits, int kGroup>
inline int affine_code(const BlockAffine<kBits, kGroup>& b, int i) {
  if constexpr (kBits == 8) {
    return b.qs[i];
  } else {
    const int sub = i / kQK, j = i % kQK;
    const uint8_t byte = b.qs[sub * (kQK / 2) + j % (kQK / 2)];
    return j < kQK / 2 ? byte & 0x0F : byte >> 4;
  }
}
template <int kBits, int kGroup>
inline void set_affine_code(BlockAffine<kBits, kGroup>& b, int i, int q) {
  if constexpr (kBits == 8) {
    b.qs[i] = static_cast<uint8_t>(q);
  } else {
    const int sub = i / kQK, j = i % kQK;
    uint8_t& byte = b.qs[sub * (kQK / 2) + j % (kQK / 2)];
    byte = j < kQK / 2 ? static_cast<uint8_t>((byte & 0xF0) | q)
                       : static_cast<uint8_t>((byte & 0x0F) | q << 4);
  }
}

// All kGroup codes of an affine block at once, codes[i] < 2^kBits.
template <int kBits, int kGroup>
inline void set_affine_codes(BlockAffine<kBits, kGroup>& b, const uint8_t* codes) {
  if constexpr (kBits == 8) {
    std::memcpy(b.qs, codes, kGroup);
  } else {
    for (int sub = 0; sub < kGroup / kQK; ++sub)
      for (int j = 0; j < kQK / 2; ++j)
        b.qs[sub * (kQK / 2) + j] =
            static_cast<uint8_t>(codes[sub * kQK + j] | codes[sub * kQK + kQK / 2 + j] << 4);
  }
}

struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  uint16_t d;
  uint16_t dmin;
};
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  uint16_t d;
};
// 8 sub-blocks of 32 with 6-bit scales and mins: x = d * sc * q - dmin * m
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
// 16 sub-blocks of 16 with int8 scales: x = d * sc * (q - 32), q 6 bits = ql nibble | qh 2 bits
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};
// Activations for the K types: bsums[i] = sum of qs[16 i .. 16 i + 15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};

// The IQ4 types' 16 levels (ggml's kvalues_iq4nl): a non-uniform grid, denser near zero,
// where weights are. Never −128, so SIMD dots may take |level| as unsigned.
inline constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};
// x = d · kIq4Levels[q]; q's nibbles as Q4_0's (element j low nibble of qs[j], j + 16 high).
struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// 8 sub-blocks of 32: x = d · (ls − 32) · kIq4Levels[q], ls 6 bits: the low 4 in nibble j % 2
// of scales_l[j / 2], the high 2 in bits 2j, 2j + 1 of scales_h. Sub-block j's quants are
// qs[16j .. 16j + 15] as an IQ4_NL block's.
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};
inline int iq4_xs_scale(const BlockIq4Xs& b, int j) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xf) | ((b.scales_h >> (2 * j)) & 3) << 4;
}

// MXFP4's 16 levels (ggml's kvalues_mxfp4): the e2m1 values 0, 0.5, 1, 1.5, 2, 3, 4, 6 doubled
// into integers, index 8 + i the negation of i (a sign bit). Never −128, as kIq4Levels.
inline constexpr int8_t kMxfp4Levels[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};
// x = 2^(e − 128) · kMxfp4Levels[q] (OCP's e8m0 scale 2^(e − 127) times the e2m1 value, both
// halved and doubled); q's nibbles as IQ4_NL's.
struct BlockMxfp4 {
  uint8_t e;
  uint8_t qs[kQK / 2];
};
// 2^(e − 128), exact: a normal float's exponent field e − 1, or for e < 2 the subnormals 2^−128
// and 2^−127 (ggml's E8M0_TO_FP32_HALF).
inline float mxfp4_scale(uint8_t e) {
  return std::bit_cast<float>(e < 2 ? uint32_t{0x00200000} << e
                                    : static_cast<uint32_t>(e - 1) << 23);
}

// The 3-bit lattice types (iq3_grids.h's grids): super-blocks of 256 in 8 sub-blocks of 32,
// element e of sub-block j = d · c · m · (sign bit e ? −1 : 1), m byte e % 4 of the grid entry
// of group e / 4, c the sub-block's scale: IQ3_XXS's (2 ls + 1) / 4, IQ3_S's 2 ls + 1. The
// helpers below give each sub-block's integer parts as the IQ2 types' (below) do, so that one
// scalar twin serves both: lattice_scale (2 ls + 1, both halves of the sub-block alike),
// lattice_signs (bit e: element e negative) and lattice_grid (the entry of group m, 0..7).
//
// IQ3_XXS: qs[8j + m] the grid index of group m; bytes 64 + 4j.. the little-endian word of
// sub-block j: ls its top 4 bits, below them 4 × 7 sign bits (kLatticeSigns, group of 8 l at
// bits 7l..7l+6).
struct BlockIq3Xxs {
  uint16_t d;
  uint8_t qs[3 * kQKK / 8];
};
inline uint32_t iq3_xxs_word(const BlockIq3Xxs& b, int j) {
  uint32_t w;
  std::memcpy(&w, b.qs + kQKK / 4 + 4 * j, sizeof w);
  return w;
}
inline int lattice_scale(const BlockIq3Xxs& b, int j, int) {
  return 2 * static_cast<int>(iq3_xxs_word(b, j) >> 28) + 1;
}
inline uint32_t lattice_signs(const BlockIq3Xxs& b, int j) {
  const uint32_t w = iq3_xxs_word(b, j);
  uint32_t s = 0;
  for (int l = 0; l < 4; ++l)
    s |= static_cast<uint32_t>(kLatticeSigns[(w >> (7 * l)) & 127]) << (8 * l);
  return s;
}
inline uint32_t lattice_grid(const BlockIq3Xxs& b, int j, int m) {
  return kIq3XxsGrid[b.qs[8 * j + m]];
}

// IQ3_S: group m of sub-block j indexes the grid by qs[8j + m] | (bit m of qh[j]) << 8; its
// sign bits are signs[4j .. 4j + 3] (little-endian: bit e element e), its ls the nibble j % 2 of
// scales[j / 2].
struct BlockIq3S {
  uint16_t d;
  uint8_t qs[kQKK / 4];
  uint8_t qh[kQKK / 32];
  uint8_t signs[kQKK / 8];
  uint8_t scales[kQKK / 64];
};
inline int lattice_scale(const BlockIq3S& b, int j, int) {
  return 2 * ((b.scales[j / 2] >> (4 * (j % 2))) & 0xf) + 1;
}
inline uint32_t lattice_signs(const BlockIq3S& b, int j) {
  uint32_t s;
  std::memcpy(&s, b.signs + 4 * j, sizeof s);
  return s;
}
inline uint32_t lattice_grid(const BlockIq3S& b, int j, int m) {
  return kIq3SGrid[b.qs[8 * j + m] | ((b.qh[j] >> m) & 1) << 8];
}
// What multiplies d · Σ_j (2 ls_j + 1) · Σ ±m · a: IQ3_XXS's quarter (exact in floats).
inline float lattice_factor(const BlockIq3Xxs*) { return 0.25f; }
inline float lattice_factor(const BlockIq3S*) { return 1.0f; }

// The 2-bit lattice types (iq2_grids.h's grids): super-blocks of 256 in 8 sub-blocks of 32, each
// two halves of 16; element e of sub-block j = d · (2 ls + 1) / 8 · m · (sign bit e ? −1 : 1), m
// byte e % 8 of the grid entry of group e / 8, ls the 4-bit scale of half e / 16 (IQ2_XXS: one
// for both). The helpers give each sub-block's integer parts: lattice_scale (2 ls + 1 of half h),
// lattice_signs (bit e: element e negative) and lattice_grid (the entry of group g, 0..3).
//
// IQ2_XXS: bytes 8j.. of qs: the grid indices of sub-block j's 4 groups, then its little-endian
// word: ls the top 4 bits, below them 4 × 7 sign bits (kLatticeSigns, group l at bits 7l..).
struct BlockIq2Xxs {
  uint16_t d;
  uint8_t qs[kQKK / 4];
};
inline uint32_t iq2_xxs_word(const BlockIq2Xxs& b, int j) {
  uint32_t w;
  std::memcpy(&w, b.qs + 8 * j + 4, sizeof w);
  return w;
}
inline int lattice_scale(const BlockIq2Xxs& b, int j, int) {
  return 2 * static_cast<int>(iq2_xxs_word(b, j) >> 28) + 1;
}
inline uint32_t lattice_signs(const BlockIq2Xxs& b, int j) {
  const uint32_t w = iq2_xxs_word(b, j);
  uint32_t s = 0;
  for (int l = 0; l < 4; ++l)
    s |= static_cast<uint32_t>(kLatticeSigns[(w >> (7 * l)) & 127]) << (8 * l);
  return s;
}
inline uint64_t lattice_grid(const BlockIq2Xxs& b, int j, int g) {
  return kIq2XxsGrid[b.qs[8 * j + g]];
}

// IQ2_XS: group g of sub-block j is the word qs[4j + g]: its low 9 bits index the grid, its top 7
// are sign bits (kLatticeSigns); half h's ls is nibble h of scales[j].
struct BlockIq2Xs {
  uint16_t d;
  uint16_t qs[kQKK / 8];
  uint8_t scales[kQKK / 32];
};
inline int lattice_scale(const BlockIq2Xs& b, int j, int h) {
  return 2 * ((b.scales[j] >> (4 * h)) & 0xf) + 1;
}
inline uint32_t lattice_signs(const BlockIq2Xs& b, int j) {
  uint32_t s = 0;
  for (int l = 0; l < 4; ++l)
    s |= static_cast<uint32_t>(kLatticeSigns[b.qs[4 * j + l] >> 9]) << (8 * l);
  return s;
}
inline uint64_t lattice_grid(const BlockIq2Xs& b, int j, int g) {
  return kIq2XsGrid[b.qs[4 * j + g] & 511];
}

// IQ2_S: group g of sub-block j indexes the grid by qs[4j + g] | (bits 2g, 2g + 1 of qh[j]) << 8;
// its 8 sign bits are qs[32 + 4j + g] (bit e: element e), half h's ls nibble h of scales[j].
struct BlockIq2S {
  uint16_t d;
  uint8_t qs[kQKK / 4];  // 32 grid index bytes, then 32 sign bytes
  uint8_t qh[kQKK / 32];
  uint8_t scales[kQKK / 32];
};
inline int lattice_scale(const BlockIq2S& b, int j, int h) {
  return 2 * ((b.scales[j] >> (4 * h)) & 0xf) + 1;
}
inline uint32_t lattice_signs(const BlockIq2S& b, int j) {
  uint32_t s;
  std::memcpy(&s, b.qs + kQKK / 8 + 4 * j, sizeof s);
  return s;
}
inline uint64_t lattice_grid(const BlockIq2S& b, int j, int g) {
  return kIq2SGrid[b.qs[4 * j + g] | ((b.qh[j] >> (2 * g)) & 3) << 8];
}
// What multiplies d · Σ_j Σ_h (2 ls + 1) · Σ ±m · a: the eighth (exact in floats).
inline float lattice_factor(const BlockIq2Xxs*) { return 0.125f; }
inline float lattice_factor(const BlockIq2Xs*) { return 0.125f; }
inline float lattice_factor(const BlockIq2S*) { return 0.125f; }

// The 1-bit lattice types (iq1_grids.h's grid): super-blocks of 256 in 8 sub-blocks of 32, each
// 4 groups of 8; element e of sub-block j = d · (2 ls + 1) · (g + δ / 8), g byte e % 8 of the grid
// entry of group e / 8 (in {−1, 0, 1}), δ = ±1 the group's delta sign, ls the scale of the
// element's half of the sub-block (IQ1_S: one for both halves). The helpers below give the
// integer parts: iq1_index (group l's 11-bit grid index), iq1_delta (±1), iq1_scale (2 ls + 1 of
// half h) and iq1_d_bits (d's f16 bits).
//
// IQ1_S: qs[4j + l] the low 8 bits of group l's index; qh[j] its bits 8..10 at 3l..3l+2, ls at
// bits 12..14, the delta sign (set: −) at bit 15, for all 4 groups.
struct BlockIq1S {
  uint16_t d;
  uint8_t qs[kQKK / 8];
  uint16_t qh[kQKK / 32];
};
inline int iq1_index(const BlockIq1S& b, int j, int l) {
  return b.qs[4 * j + l] | ((b.qh[j] >> (3 * l)) & 7) << 8;
}
inline int iq1_delta(const BlockIq1S& b, int j, int) { return b.qh[j] & 0x8000 ? -1 : 1; }
inline int iq1_scale(const BlockIq1S& b, int j, int) { return 2 * ((b.qh[j] >> 12) & 7) + 1; }
inline uint16_t iq1_d_bits(const BlockIq1S& b) { return b.d; }

// IQ1_M: qs[4j + l] the low 8 bits of group l's index; byte qh[2j + l / 2] its bits 8..10 at
// 4 (l % 2).., the delta sign (set: −) at 4 (l % 2) + 3. The 8 scale bytes as 4 little-endian
// words w: the ls of half h of sub-block j at bits 6 (j % 2) + 3h.. of w[j / 2] (3 bits); the top
// nibble of w[n] is nibble n of d.
struct BlockIq1M {
  uint8_t qs[kQKK / 8];
  uint8_t qh[kQKK / 16];
  uint8_t scales[kQKK / 32];
};
inline uint16_t iq1_m_scale_word(const BlockIq1M& b, int n) {
  return static_cast<uint16_t>(b.scales[2 * n] | b.scales[2 * n + 1] << 8);
}
inline int iq1_index(const BlockIq1M& b, int j, int l) {
  return b.qs[4 * j + l] | ((b.qh[2 * j + l / 2] >> (4 * (l % 2))) & 7) << 8;
}
inline int iq1_delta(const BlockIq1M& b, int j, int l) {
  return (b.qh[2 * j + l / 2] >> (4 * (l % 2) + 3)) & 1 ? -1 : 1;
}
inline int iq1_scale(const BlockIq1M& b, int j, int h) {
  return 2 * ((iq1_m_scale_word(b, j / 2) >> (6 * (j % 2) + 3 * h)) & 7) + 1;
}
inline uint16_t iq1_d_bits(const BlockIq1M& b) {
  uint16_t d = 0;
  for (int n = 0; n < 4; ++n) d |= static_cast<uint16_t>((iq1_m_scale_word(b, n) >> 12) << (4 * n));
  return d;
}
// Group l's grid value of element e (0..7).
inline int iq1_grid_value(int index, int e) {
  return static_cast<int8_t>(kIq1Grid[static_cast<size_t>(index)] >> (8 * e));
}
// What multiplies d · Σ (2 ls + 1) · Σ (8 g + δ) · a: the eighth that makes g + δ / 8 whole.
inline float lattice_factor(const BlockIq1S*) { return 0.125f; }
inline float lattice_factor(const BlockIq1M*) { return 0.125f; }

static_assert(sizeof(BlockIq4Nl) == 18 && sizeof(BlockIq4Xs) == 136 && sizeof(BlockMxfp4) == 17);
static_assert(sizeof(BlockIq3Xxs) == 98 && sizeof(BlockIq3S) == 110);
static_assert(sizeof(BlockIq2Xxs) == 66 && sizeof(BlockIq2Xs) == 74 && sizeof(BlockIq2S) == 82);
static_assert(sizeof(BlockIq1S) == 50 && sizeof(BlockIq1M) == 56);
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockAffine<4, 32>) == 24 && sizeof(BlockAffine<4, 64>) == 40 &&
              sizeof(BlockAffine<4, 128>) == 72 && sizeof(BlockAffine<8, 32>) == 40 &&
              sizeof(BlockAffine<8, 64>) == 72 && sizeof(BlockAffine<8, 128>) == 136);

// f.template operator()<BlockAffine<bits, group>>() for an INT*_G* type, R{} for any other:
// one switch from the type to the block for every function templated on it.
template <class R, class F>
R with_affine_block(DType t, F&& f) {
  switch (t) {
    case DType::INT4_G32:
      return f.template operator()<BlockAffine<4, 32>>();
    case DType::INT4_G64:
      return f.template operator()<BlockAffine<4, 64>>();
    case DType::INT4_G128:
      return f.template operator()<BlockAffine<4, 128>>();
    case DType::INT8_G32:
      return f.template operator()<BlockAffine<8, 32>>();
    case DType::INT8_G64:
      return f.template operator()<BlockAffine<8, 64>>();
    case DType::INT8_G128:
      return f.template operator()<BlockAffine<8, 128>>();
    default:
      return R{};
  }
}

// f.template operator()<Block>() for an IQ3, IQ2 or IQ1 type's block, R{} for any other type, as
// with_affine_block.
template <class R, class F>
R with_lattice_block(DType t, F&& f) {
  switch (t) {
    case DType::IQ3_XXS:
      return f.template operator()<BlockIq3Xxs>();
    case DType::IQ3_S:
      return f.template operator()<BlockIq3S>();
    case DType::IQ2_XXS:
      return f.template operator()<BlockIq2Xxs>();
    case DType::IQ2_XS:
      return f.template operator()<BlockIq2Xs>();
    case DType::IQ2_S:
      return f.template operator()<BlockIq2S>();
    case DType::IQ1_S:
      return f.template operator()<BlockIq1S>();
    case DType::IQ1_M:
      return f.template operator()<BlockIq1M>();
    default:
      return R{};
  }
}

}  // namespace tern
