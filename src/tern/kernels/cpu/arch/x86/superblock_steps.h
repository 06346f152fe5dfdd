// What the kernels of the 256-element types whose scalar twins take one float step per
// super-block (Q2_K, Q3_K: {avx2,avx512}/vec_dot_k2_k3.cpp; IQ4_XS: {avx2,avx512}/vec_dot_iq4.cpp;
// the lattice types IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and IQ1_M: vec_dot_lattice.cpp)
// share: the reductions of their exact int32 sums, the scalar twin's float step per super-block
// (generic/vec_dot.cpp) for one token or four side by side, the GEMV and GEMM tile built from
// them, and Q2_K/Q3_K's sub-block scales and kernels over each level's own integer dots, so that
// each level gives the scalar twin's bits; and what the 32-element lookup types (IQ4_NL, MXFP4)
// differ by, whose kernels are one template. Needs AVX2; internal linkage, so each file compiles
// its own copy with its own flags.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {
namespace {

inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01));
  return _mm_cvtsi128_si32(s);
}

// The lane sums of v[0..3], as 4 int32 lanes (one transposing reduction instead of 4).
inline __m128i hsum4_epi32(const __m256i* v) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// Q2_K's 16 4-bit sub-block scales and mins.
inline __m128i q2_scale_bytes(const BlockQ2_K& w) {
  return _mm_and_si128(load128(w.scales), _mm_set1_epi8(0x0f));
}
inline __m128i q2_min_bytes(const BlockQ2_K& w) {
  return _mm_and_si128(_mm_srli_epi16(load128(w.scales), 4), _mm_set1_epi8(0x0f));
}
inline __m256i q2_scales16(const BlockQ2_K& w) { return _mm256_cvtepu8_epi16(q2_scale_bytes(w)); }
inline __m256i q2_mins16(const BlockQ2_K& w) { return _mm256_cvtepu8_epi16(q2_min_bytes(w)); }

// Q3_K's 16 scales, 6 bits each biased by 32, from the 12 packed bytes: byte j (< 8) holds the
// low nibbles of sub-blocks j and j + 8; the top 2 bits of sub-block j are bits 2 (j / 4) of
// byte 8 + j % 4. Still biased (0..63).
inline __m128i q3_biased_scale_bytes(const BlockQ3_K& w) {
  uint32_t top;
  std::memcpy(&top, w.scales + 8, 4);
  const __m128i low8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.scales));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  // Sub-blocks 0-7 from the low nibbles of bytes 0-7, 8-15 from their high nibbles.
  const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(low8, nibble),
                                         _mm_and_si128(_mm_srli_epi16(low8, 4), nibble));
  // Word n (sub-blocks 4n..4n+3) takes bytes 8-11 shifted right by 2n.
  const __m128i high = _mm_and_si128(
      _mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(top)), _mm_setr_epi32(0, 2, 4, 6)),
      _mm_set1_epi8(3));
  return _mm_or_si128(low, _mm_slli_epi16(high, 4));
}
// As signed int16.
inline __m256i q3_scales16(const BlockQ3_K& w) {
  return _mm256_sub_epi16(_mm256_cvtepu8_epi16(q3_biased_scale_bytes(w)), _mm256_set1_epi16(32));
}

// Q3_K's quants as stored are q + 4: Σ sc · q · a = Σ sc · (stored · a) − 4 Σ sc · bsum.
inline __m256i q3_offset(__m256i sc16, const BlockQ8_K& a) {
  return _mm256_slli_epi32(_mm256_madd_epi16(load256(a.bsums), sc16), 2);
}
// Q2_K's mins times the activation's sums, in 8 int32 lanes.
inline __m256i q2_mins_dot(__m256i mins16, const BlockQ8_K& a) {
  return _mm256_madd_epi16(load256(a.bsums), mins16);
}

// The scalar twin's step: sum += (a.d · d) · sumi − (a.d · dmin) · summ (Q3_K, IQ4_XS: no mins
// term).
inline float q2_k_step(float sum, const BlockQ2_K& w, const BlockQ8_K& a, int sumi, int summ) {
  return sum + ((a.d * f16(w.d)) * static_cast<float>(sumi) -
                (a.d * f16(w.dmin)) * static_cast<float>(summ));
}
// A super-block's d (IQ1_M's spread over its scale bytes).
template <typename Block>
inline float superblock_d(const Block& w) {
  return f16(w.d);
}
inline float superblock_d(const BlockIq1M& w) { return f16(iq1_d_bits(w)); }
template <typename Block>
inline float symmetric_step(float sum, const Block& w, const BlockQ8_K& a, int sumi) {
  return sum + (a.d * superblock_d(w)) * static_cast<float>(sumi);
}

// IQ4_XS's 8 sub-block scales (ls − 32), lane j sub-block j, each in both int16 halves of its
// lane, as vpmaddwd / vpdpwssd pair them: nibble j of scales_l (little-endian) and bits 2j of
// scales_h.
inline __m256i iq4_xs_scale_pairs(const BlockIq4Xs& w) {
  uint32_t low;
  std::memcpy(&low, w.scales_l, sizeof low);
  const __m256i l =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(low)),
                                         _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                       _mm256_set1_epi32(0xf));
  const __m256i h =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(w.scales_h),
                                         _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                       _mm256_set1_epi32(3));
  const __m256i ls =
      _mm256_sub_epi32(_mm256_or_si256(l, _mm256_slli_epi32(h, 4)), _mm256_set1_epi32(32));
  return _mm256_or_si256(_mm256_and_si256(ls, _mm256_set1_epi32(0xffff)),
                         _mm256_slli_epi32(ls, 16));
}
// 16 levels (kIq4Levels, kMxfp4Levels) in each 128-bit lane, for vpshufb.
inline __m256i level_table256(const int8_t* levels) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
}

// The 32-element lookup blocks (IQ4_NL, MXFP4: x = scale · levels[q], q as Q4_0's nibbles), whose
// kernels are one template: a block's levels and its scale as the scalar twin takes it.
inline const int8_t* lookup_levels(const BlockIq4Nl*) { return kIq4Levels; }
inline const int8_t* lookup_levels(const BlockMxfp4*) { return kMxfp4Levels; }
inline float lookup_scale(const BlockIq4Nl& w) { return f16(w.d); }
inline float lookup_scale(const BlockMxfp4& w) { return mxfp4_scale(w.e); }

// The same steps for 4 tokens a[0..3] at once, lane c token c: the same IEEE operations on the
// same values as the scalar step, so each lane has its bits.
inline __m128 token_scales(const BlockQ8_K* const* a, int64_t i) {
  return _mm_setr_ps(a[0][i].d, a[1][i].d, a[2][i].d, a[3][i].d);
}
inline __m128 q2_k_step4(__m128 sum, const BlockQ2_K& w, __m128 ad, __m128i sumi, __m128i summ) {
  const __m128 x = _mm_mul_ps(_mm_mul_ps(ad, _mm_set1_ps(f16(w.d))), _mm_cvtepi32_ps(sumi));
  const __m128 y = _mm_mul_ps(_mm_mul_ps(ad, _mm_set1_ps(f16(w.dmin))), _mm_cvtepi32_ps(summ));
  return _mm_add_ps(sum, _mm_sub_ps(x, y));
}
template <typename Block>
inline __m128 symmetric_step4(__m128 sum, const Block& w, __m128 ad, __m128i sumi) {
  return _mm_add_ps(
      sum, _mm_mul_ps(_mm_mul_ps(ad, _mm_set1_ps(superblock_d(w))), _mm_cvtepi32_ps(sumi)));
}

// A row's dot (the GEMV's), for Q2_K (with mins), Q3_K or IQ4_XS: sums(i, &dots, &mins) gives
// super-block i's int32 sums in 8 lanes each (Q3_K: its offset already in dots; mins unused). Four
// super-blocks' sums are reduced together, then meet the floats one super-block at a time in the
// scalar twin's order.
template <typename Block, typename SuperBlockSums>
float superblock_dot(const Block* w, const BlockQ8_K* a, int64_t nb, SuperBlockSums sums) {
  constexpr bool kMins = std::is_same_v<Block, BlockQ2_K>;
  auto step = [&](float sum, int64_t i, int sumi, int summ) {
    if constexpr (kMins)
      return q2_k_step(sum, w[i], a[i], sumi, summ);
    else
      return symmetric_step(sum, w[i], a[i], sumi);
  };
  float sum = 0.0f;
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    __m256i dots[4], mins[4];
    for (int s = 0; s < 4; ++s) sums(i + s, &dots[s], &mins[s]);
    alignas(16) int sumi[4], summ[4] = {};
    _mm_store_si128(reinterpret_cast<__m128i*>(sumi), hsum4_epi32(dots));
    if constexpr (kMins) _mm_store_si128(reinterpret_cast<__m128i*>(summ), hsum4_epi32(mins));
    for (int s = 0; s < 4; ++s) sum = step(sum, i + s, sumi[s], summ[s]);
  }
  for (; i < nb; ++i) {
    __m256i dots, mins;
    sums(i, &dots, &mins);
    sum = step(sum, i, hsum_epi32(dots), kMins ? hsum_epi32(mins) : 0);
  }
  return sum;
}

// A GEMM tile over 4-token micro-kernels micro(w_row, a[4], nb, out[4]) of blocks of kElems
// (any type's, activations of type Activation): tokens outer, so a few activation rows stay in
// L1 while the tile's weight rows stream past. A ragged edge of fewer tokens repeats the last
// one and drops its lanes.
constexpr int kMicroTokens = 4;
template <typename Block, typename Activation, int kElems,
          void (*micro)(const Block*, const Activation* const*, int64_t, float*)>
void four_token_gemm_tile(int64_t k, const void* w_data, size_t w_stride, int64_t rows,
                          const void* a_data, size_t a_stride, int64_t tokens, float* y,
                          size_t ldy) {
  const int64_t nb = k / kElems;
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  for (int64_t c0 = 0; c0 < tokens; c0 += kMicroTokens) {
    const int cc = static_cast<int>(std::min<int64_t>(kMicroTokens, tokens - c0));
    const Activation* a[kMicroTokens];
    for (int c = 0; c < kMicroTokens; ++c)
      a[c] = reinterpret_cast<const Activation*>(abytes + (c0 + std::min(c, cc - 1)) * a_stride);
    for (int64_t r = 0; r < rows; ++r) {
      float out[kMicroTokens];
      micro(reinterpret_cast<const Block*>(wbytes + r * w_stride), a, nb, out);
      for (int c = 0; c < cc; ++c) y[(c0 + c) * ldy + r] = out[c];
    }
  }
}
// The super-block types' (Q8_K activations).
template <typename Block, void (*micro)(const Block*, const BlockQ8_K* const*, int64_t, float*)>
void superblock_gemm_tile(int64_t k, const void* w_data, size_t w_stride, int64_t rows,
                          const void* a_data, size_t a_stride, int64_t tokens, float* y,
                          size_t ldy) {
  four_token_gemm_tile<Block, BlockQ8_K, kQKK, micro>(k, w_data, w_stride, rows, a_data, a_stride,
                                                      tokens, y, ldy);
}

// ---- The kernels, over a level's Dots ----------------------------------------------------------
//
// Dots::q2<C>(w, sc16, a, i, sumi) and Dots::q3<C>(…): sumi[c] = Σ_j sc_j · Σ_l q[16j + l] ·
// a_c[16j + l] over super-block i of the C token rows a[c] (Q3_K's quants as stored, q + 4), in 8
// int32 lanes, with the 16 int16 sub-block scales sc16: the one part each level writes itself.

template <typename Dots>
float dot_q2_k(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockQ2_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  return superblock_dot(w, a, k / kQKK, [&](int64_t i, __m256i* dots, __m256i* mins) {
    prefetch_ahead(w + i, sizeof(w[i]));
    Dots::template q2<1>(w[i], q2_scales16(w[i]), &a, i, dots);
    *mins = q2_mins_dot(q2_mins16(w[i]), a[i]);
  });
}

template <typename Dots>
float dot_q3_k(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockQ3_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  return superblock_dot(w, a, k / kQKK, [&](int64_t i, __m256i* dots, __m256i*) {
    prefetch_ahead(w + i, sizeof(w[i]));
    const __m256i sc16 = q3_scales16(w[i]);
    Dots::template q3<1>(w[i], sc16, &a, i, dots);
    *dots = _mm256_sub_epi32(*dots, q3_offset(sc16, a[i]));
  });
}

// The tile's micro-kernels: one row × 4 tokens.
template <typename Dots>
void micro_q2_k(const BlockQ2_K* w, const BlockQ8_K* const* a, int64_t nb, float* out) {
  __m128 sum = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i dots[kMicroTokens], mins[kMicroTokens];
    Dots::template q2<kMicroTokens>(w[i], q2_scales16(w[i]), a, i, dots);
    const __m256i mins16 = q2_mins16(w[i]);
    for (int c = 0; c < kMicroTokens; ++c) mins[c] = q2_mins_dot(mins16, a[c][i]);
    sum = q2_k_step4(sum, w[i], token_scales(a, i), hsum4_epi32(dots), hsum4_epi32(mins));
  }
  _mm_storeu_ps(out, sum);
}

template <typename Dots>
void micro_q3_k(const BlockQ3_K* w, const BlockQ8_K* const* a, int64_t nb, float* out) {
  __m128 sum = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i sc16 = q3_scales16(w[i]);
    __m256i dots[kMicroTokens];
    Dots::template q3<kMicroTokens>(w[i], sc16, a, i, dots);
    for (int c = 0; c < kMicroTokens; ++c)
      dots[c] = _mm256_sub_epi32(dots[c], q3_offset(sc16, a[c][i]));
    sum = symmetric_step4(sum, w[i], token_scales(a, i), hsum4_epi32(dots));
  }
  _mm_storeu_ps(out, sum);
}

// Dots::iq4<C>(w, a, i, sumi): IQ4_XS's sumi[c] = Σ_j (ls_j − 32) · Σ level · a_c over
// super-block i, in 8 int32 lanes.
template <typename Dots>
float dot_iq4_xs(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockIq4Xs*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  return superblock_dot(w, a, k / kQKK, [&](int64_t i, __m256i* dots, __m256i*) {
    prefetch_ahead(w + i, sizeof(w[i]));
    Dots::template iq4<1>(w[i], &a, i, dots);
  });
}

template <typename Dots>
void micro_iq4_xs(const BlockIq4Xs* w, const BlockQ8_K* const* a, int64_t nb, float* out) {
  __m128 sum = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i dots[kMicroTokens];
    Dots::template iq4<kMicroTokens>(w[i], a, i, dots);
    sum = symmetric_step4(sum, w[i], token_scales(a, i), hsum4_epi32(dots));
  }
  _mm_storeu_ps(out, sum);
}

// Dots::lattice<C>(w, a, i, sumi): an IQ3, IQ2 or IQ1 type's sumi[c] = Σ (2 ls + 1) · Σ v · a_c
// over super-block i (v = ±m, or IQ1's 8 g + δ; IQ2's scales per half sub-block), in 8 int32
// lanes; the row's sum then times lattice_factor, as the scalar twin's.
template <typename Block, typename Dots>
float dot_lattice(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const Block*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  return lattice_factor(w) *
         superblock_dot(w, a, k / kQKK, [&](int64_t i, __m256i* dots, __m256i*) {
           prefetch_ahead(w + i, sizeof(w[i]));
           Dots::template lattice<1>(w[i], &a, i, dots);
         });
}

template <typename Block, typename Dots>
void micro_lattice(const Block* w, const BlockQ8_K* const* a, int64_t nb, float* out) {
  __m128 sum = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i dots[kMicroTokens];
    Dots::template lattice<kMicroTokens>(w[i], a, i, dots);
    sum = symmetric_step4(sum, w[i], token_scales(a, i), hsum4_epi32(dots));
  }
  _mm_storeu_ps(out, _mm_mul_ps(_mm_set1_ps(lattice_factor(w)), sum));
}

template <typename Dots>
VecDotFn lattice_vec_dot(DType weight) {
  return with_lattice_block<VecDotFn>(
      weight, []<typename Block>() -> VecDotFn { return dot_lattice<Block, Dots>; });
}

template <typename Dots>
GemmTileFn lattice_gemm_tile(DType weight) {
  return with_lattice_block<GemmTileFn>(weight, []<typename Block>() -> GemmTileFn {
    return superblock_gemm_tile<Block, micro_lattice<Block, Dots>>;
  });
}

template <typename Dots>
VecDotFn k2_k3_vec_dot(DType weight) {
  switch (weight) {
    case DType::Q2_K:
      return dot_q2_k<Dots>;
    case DType::Q3_K:
      return dot_q3_k<Dots>;
    default:
      return nullptr;
  }
}

template <typename Dots>
GemmTileFn k2_k3_gemm_tile_of(DType weight) {
  switch (weight) {
    case DType::Q2_K:
      return superblock_gemm_tile<BlockQ2_K, micro_q2_k<Dots>>;
    case DType::Q3_K:
      return superblock_gemm_tile<BlockQ3_K, micro_q3_k<Dots>>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace tern::cpu
