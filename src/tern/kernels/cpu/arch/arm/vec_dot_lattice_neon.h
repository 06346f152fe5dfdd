// The lattice types IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and IQ1_M on ARM, bit for bit
// the scalar twins of generic/vec_dot.cpp (dot_lattice_signs, dot_iq1): per super-block the exact
// int32 Σ (2 ls + 1) · Σ v · a, in any order, then the twin's float step, and the row's sum times
// lattice_factor; for either integer-dot policy: neon/vec_dot_lattice.cpp and
// dotprod/vec_dot_lattice.cpp instantiate it. One kernel serves the seven types: a sub-block's 32
// values v come as signed bytes from block_layouts.h's helpers (IQ3, IQ2: grid magnitudes m < 64
// under the sign word; IQ1: 8 g + δ, |·| ≤ 9), so a product fits int16 (an activation is never
// −128, quantize_row.h), as WideningDot needs.
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tern/blocks/block_layouts.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {
namespace {

// The grid entries are copied to bytes in element order: byte e of an entry is element e.
static_assert(std::endian::native == std::endian::little);

// The IQ1 types, whose values carry their own signs (the others' take a sign word).
template <typename Block>
concept Iq1Lattice = std::is_same_v<Block, BlockIq1S> || std::is_same_v<Block, BlockIq1M>;

// A sub-block as the dots take it: its values, elements 16h..16h + 15 in v[h], and the scale
// 2 ls + 1 of each half.
struct LatticeSubBlock {
  int8x16_t v[2];
  int scale[2];
};

// 0xff in byte e where bit e of the 16 sign bits is set (element e negative).
inline int8x16_t lattice_negative_bytes(uint32_t bits) {
  const uint8x16_t spread = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits & 0xff)),
                                        vdup_n_u8(static_cast<uint8_t>((bits >> 8) & 0xff)));
  const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201));
  return vreinterpretq_s8_u8(vtstq_u8(spread, bit));
}

// IQ3, IQ2: sub-block j's magnitudes by scalar loads of its grid entries (4 bytes each for IQ3,
// 8 for IQ2), negated under the sign word: (m ^ s) − s, s = 0 or −1.
template <typename Block>
inline LatticeSubBlock lattice_sub_block(const Block& w, int j) {
  constexpr int kPerEntry = sizeof(lattice_grid(w, 0, 0));
  alignas(16) uint8_t m[kQK];
  for (int g = 0; g < kQK / kPerEntry; ++g) {
    const auto entry = lattice_grid(w, j, g);
    std::memcpy(m + kPerEntry * g, &entry, kPerEntry);
  }
  const uint32_t signs = lattice_signs(w, j);
  LatticeSubBlock s;
  for (int h = 0; h < 2; ++h) {
    const int8x16_t negative = lattice_negative_bytes(signs >> (16 * h));
    const int8x16_t magnitudes = vreinterpretq_s8_u8(vld1q_u8(m + 16 * h));
    s.v[h] = vsubq_s8(veorq_s8(magnitudes, negative), negative);
    s.scale[h] = lattice_scale(w, j, h);
  }
  return s;
}

// IQ1: half h is groups 2h and 2h + 1, each 8 g + δ with its grid entry g (bytes −1, 0, 1) and
// its delta δ (±1).
template <Iq1Lattice Block>
inline LatticeSubBlock lattice_sub_block(const Block& w, int j) {
  LatticeSubBlock s;
  for (int h = 0; h < 2; ++h) {
    const int l = 2 * h;
    const uint64x2_t g =
        vcombine_u64(vcreate_u64(kIq1Grid[static_cast<size_t>(iq1_index(w, j, l))]),
                     vcreate_u64(kIq1Grid[static_cast<size_t>(iq1_index(w, j, l + 1))]));
    const int8x16_t delta = vcombine_s8(vdup_n_s8(static_cast<int8_t>(iq1_delta(w, j, l))),
                                        vdup_n_s8(static_cast<int8_t>(iq1_delta(w, j, l + 1))));
    s.v[h] = vaddq_s8(vshlq_n_s8(vreinterpretq_s8_u64(g), 3), delta);
    s.scale[h] = iq1_scale(w, j, h);
  }
  return s;
}

// The super-block's d, as the twin takes it (IQ1_M's spread over its scale bytes).
template <typename Block>
inline float lattice_d(const Block& w) {
  if constexpr (Iq1Lattice<Block>)
    return f16_to_f32(iq1_d_bits(w));
  else
    return f16_to_f32(w.d);
}

// The super-block's Σ (2 ls + 1) · Σ v · a_c against C token rows x[c] (its 256 activations), in
// 4 int32 lanes each: each sub-block decoded once for all of them.
template <class Dot, int C, typename Block>
inline void lattice_sums(const Block& w, const int8_t* const* x, int32x4_t* sumi) {
  for (int c = 0; c < C; ++c) sumi[c] = vdupq_n_s32(0);
  for (int j = 0; j < kQKK / kQK; ++j) {
    const LatticeSubBlock s = lattice_sub_block(w, j);
    for (int c = 0; c < C; ++c) {
      for (int h = 0; h < 2; ++h) {
        const int8x16_t a = vld1q_s8(x[c] + kQK * j + 16 * h);
        sumi[c] = vmlaq_n_s32(sumi[c], Dot::dot(vdupq_n_s32(0), s.v[h], a), s.scale[h]);
      }
    }
  }
}

// The twin's float step of one super-block.
template <typename Block>
inline float lattice_step(float sum, const Block& w, const BlockQ8_K& a, int32x4_t sumi) {
  return sum + (a.d * lattice_d(w)) * static_cast<float>(vaddvq_s32(sumi));
}

template <class Dot, typename Block>
float dot_lattice_row(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const Block*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  float sum = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const int8_t* x = a[i].qs;
    int32x4_t sumi;
    lattice_sums<Dot, 1>(w[i], &x, &sumi);
    sum = lattice_step(sum, w[i], a[i], sumi);
  }
  return lattice_factor(w) * sum;
}

// The GEMM tile's micro-kernel: one row against kLatticeTokens tokens a[c], each sub-block
// decoded once for all of them (the decode, not the dots, is most of a lattice GEMV's work); each
// token's floats take the GEMV's steps, so out[c] is its vec_dot's bits.
constexpr int kLatticeTokens = 4;
template <class Dot, typename Block>
void lattice_micro(const Block* w, const BlockQ8_K* const* a, int64_t nb, float* out) {
  float sum[kLatticeTokens] = {};
  for (int64_t i = 0; i < nb; ++i) {
    const int8_t* x[kLatticeTokens];
    for (int c = 0; c < kLatticeTokens; ++c) x[c] = a[c][i].qs;
    int32x4_t sumi[kLatticeTokens];
    lattice_sums<Dot, kLatticeTokens>(w[i], x, sumi);
    for (int c = 0; c < kLatticeTokens; ++c) sum[c] = lattice_step(sum[c], w[i], a[c][i], sumi[c]);
  }
  for (int c = 0; c < kLatticeTokens; ++c) out[c] = lattice_factor(w) * sum[c];
}

// A GEMM tile over the micro-kernel: tokens outer, so four activation rows stay in L1 while the
// tile's weight rows stream past. A ragged edge of fewer tokens repeats the last one and drops
// its outputs.
template <class Dot, typename Block>
void gemm_tile_lattice_rows(int64_t k, const void* w_data, size_t w_stride, int64_t rows,
                            const void* a_data, size_t a_stride, int64_t tokens, float* y,
                            size_t ldy) {
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  for (int64_t c0 = 0; c0 < tokens; c0 += kLatticeTokens) {
    const int cc = static_cast<int>(std::min<int64_t>(kLatticeTokens, tokens - c0));
    const BlockQ8_K* a[kLatticeTokens];
    for (int c = 0; c < kLatticeTokens; ++c)
      a[c] = reinterpret_cast<const BlockQ8_K*>(abytes + (c0 + std::min(c, cc - 1)) * a_stride);
    for (int64_t r = 0; r < rows; ++r) {
      float out[kLatticeTokens];
      lattice_micro<Dot>(reinterpret_cast<const Block*>(wbytes + r * w_stride), a, k / kQKK, out);
      for (int c = 0; c < cc; ++c) y[(c0 + c) * ldy + r] = out[c];
    }
  }
}

// The seven types' GEMV and GEMM tile for a policy; nullptr for other types.
template <class Dot>
VecDotFn vec_dot_lattice(DType weight) {
  return with_lattice_block<VecDotFn>(
      weight, []<typename Block>() -> VecDotFn { return dot_lattice_row<Dot, Block>; });
}
template <class Dot>
GemmTileFn gemm_tile_lattice(DType weight) {
  return with_lattice_block<GemmTileFn>(
      weight, []<typename Block>() -> GemmTileFn { return gemm_tile_lattice_rows<Dot, Block>; });
}

}  // namespace
}  // namespace tern::cpu
