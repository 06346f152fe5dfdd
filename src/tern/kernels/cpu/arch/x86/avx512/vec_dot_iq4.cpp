// AVX-512 dot kernels of IQ4_NL, IQ4_XS and MXFP4 rows (see vec_dot_isa.h): avx2/vec_dot_iq4.cpp's
// arithmetic on 64 elements per instruction (IQ4_XS: two sub-blocks; IQ4_NL and MXFP4: two
// blocks, the scalar twin's two 8-lane vectors side by side), and with it bit for bit the scalar
// twin of generic/vec_dot.cpp. AVX-512 has no vpsignb: the activations are negated under the mask
// of the negative levels instead (never −128, quantize_row.h). IQ4_XS's sub-block scales enter by
// VNNI's vpdpwssd; IQ4_NL's and MXFP4's four-element lane sums are VNNI's vpdpbusd.
#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/arch/x86/superblock_steps.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// 16 levels in each 128-bit lane, for vpshufb.
inline __m512i level_table512(const int8_t* levels) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
}

// Two groups of 32 (x: their 16 bytes each, elements j and j + 16 in the low and high nibbles of
// byte j) as |level| and the mask of negative levels, the first group's 32 elements first.
struct Chunk {
  __m512i magnitude;
  __mmask64 negative;
};
inline Chunk chunk_from(__m256i x, __m512i table) {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  // 128-bit lanes: the low nibbles of the first group, its high nibbles, then the second's.
  const __m512i lo_hi = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(x, nibble)),
                                           _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble), 1);
  const __m512i nibbles = _mm512_shuffle_i64x2(lo_hi, lo_hi, _MM_SHUFFLE(3, 1, 2, 0));
  const __m512i q = _mm512_shuffle_epi8(table, nibbles);
  return {_mm512_abs_epi8(q), _mm512_movepi8_mask(q)};
}
// IQ4_XS's sub-blocks 2m and 2m + 1 (elements 64m..64m+63).
inline Chunk chunk_of(const BlockIq4Xs& w, int m) {
  return chunk_from(load256(w.qs + 32 * m), level_table512(kIq4Levels));
}

// ---- IQ4_NL and MXFP4: blocks b and b + 1 in one vector, lanes 0..7 and 8..15 ----------------

template <typename Block>
inline Chunk pair_levels(const Block& w0, const Block& w1, __m512i table) {
  return chunk_from(_mm256_set_m128i(load128(w1.qs), load128(w0.qs)), table);
}

// lanes = fma(each block's integer sums over its elements 4m..4m+3 (lane m of its half),
// lookup_scale(w) · f16(a.d), lanes), on the lanes of `mask` (the low half alone: a last odd
// block, the pair's second block then a repeat of the first).
inline __m512 pair_step(__m512 lanes, const Chunk& q, float wd0, float wd1, const BlockQ8_0& a0,
                        const BlockQ8_0& a1, __mmask16 mask) {
  const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(load256(a0.qs)), load256(a1.qs), 1);
  const __m512i signed_x = _mm512_mask_sub_epi8(x, q.negative, _mm512_setzero_si512(), x);
  const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q.magnitude, signed_x);
  const __m512 scale =
      _mm512_insertf32x8(_mm512_set1_ps(wd0 * f16(a0.d)), _mm256_set1_ps(wd1 * f16(a1.d)), 1);
  return _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, lanes, mask);
}

// The scalar twin's tree: lane j + lane j + 8 (the two halves), then + 4, + 2, + 1.
inline float lanes_sum(__m512 lanes) {
  return hsum(_mm256_add_ps(_mm512_castps512_ps256(lanes), _mm512_extractf32x8_ps(lanes, 1)));
}

// The pair of blocks from b: b + 1, or b again with only the low half's mask at an odd end.
inline int64_t second_of_pair(int64_t b, int64_t nb) { return b + 1 < nb ? b + 1 : b; }
inline __mmask16 pair_mask(int64_t b, int64_t nb) { return b + 1 < nb ? 0xFFFF : 0x00FF; }

template <typename Block>
float dot_lookup(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const Block*>(w_row);
  const auto* a = static_cast<const BlockQ8_0*>(a_row);
  const int64_t nb = k / kQK;
  const __m512i table = level_table512(lookup_levels(w));
  __m512 lanes = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b += 2) {
    if (b % 8 == 0) prefetch_ahead(w + b, 8 * sizeof(Block));
    const int64_t b1 = second_of_pair(b, nb);
    lanes = pair_step(lanes, pair_levels(w[b], w[b1], table), lookup_scale(w[b]),
                      lookup_scale(w[b1]), a[b], a[b1], pair_mask(b, nb));
  }
  return lanes_sum(lanes);
}

// The tile's micro-kernel: 1 row × 4 tokens; each pair of weight blocks is decoded once for the 4.
template <typename Block>
void micro_lookup(const Block* w, const BlockQ8_0* const* a, int64_t nb, float* out) {
  const __m512i table = level_table512(lookup_levels(w));
  __m512 lanes[kMicroTokens];
  for (__m512& l : lanes) l = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b += 2) {
    const int64_t b1 = second_of_pair(b, nb);
    const Chunk q = pair_levels(w[b], w[b1], table);
    const float wd0 = lookup_scale(w[b]), wd1 = lookup_scale(w[b1]);
    const __mmask16 mask = pair_mask(b, nb);
#pragma GCC unroll 4
    for (int c = 0; c < kMicroTokens; ++c)
      lanes[c] = pair_step(lanes[c], q, wd0, wd1, a[c][b], a[c][b1], mask);
  }
  for (int c = 0; c < kMicroTokens; ++c) out[c] = lanes_sum(lanes[c]);
}

// ---- IQ4_XS: superblock_steps.h's kernels over these integer dots ---------------------------

// The scales of chunk m's two sub-blocks, 8 lanes each, from iq4_xs_scale_pairs.
inline __m512i chunk_scales(__m256i scale_pairs, int m) {
  const __m512i index = _mm512_add_epi32(
      _mm512_set1_epi32(2 * m), _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  return _mm512_permutexvar_epi32(index, _mm512_castsi256_si512(scale_pairs));
}

// sumi[c] = Σ_j (ls_j − 32) · Σ level · a_c over super-block i, in 8 int32 lanes.
template <int C>
inline void iq4_xs_dots(const BlockIq4Xs& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
  const __m256i scales = iq4_xs_scale_pairs(w);
  __m512i acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const Chunk q = chunk_of(w, m);
    const __m512i scale = chunk_scales(scales, m);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m512i x = _mm512_loadu_si512(a[c][i].qs + 64 * m);
      const __m512i signed_x = _mm512_mask_sub_epi8(x, q.negative, _mm512_setzero_si512(), x);
      acc[c] = _mm512_dpwssd_epi32(acc[c], _mm512_maddubs_epi16(q.magnitude, signed_x), scale);
    }
  }
  for (int c = 0; c < C; ++c)
    sumi[c] =
        _mm256_add_epi32(_mm512_castsi512_si256(acc[c]), _mm512_extracti64x4_epi64(acc[c], 1));
}

// The Dots of superblock_steps.h's IQ4_XS kernels.
struct Dots {
  template <int C>
  static void iq4(const BlockIq4Xs& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
    iq4_xs_dots<C>(w, a, i, sumi);
  }
};

// The GEMV's four streams side by side (vec_dot_rows): each activation chunk loaded once for
// four rows, their sums reduced together, and each row's float step in its own lane (lane r row
// r: the scalar twin's IQ4 operations on the same values).
void dot_rows_iq4_xs(int64_t k, const void* const* w_rows, const void* a_row, float* out) {
  const BlockIq4Xs* w[kVecDotRows];
  for (int r = 0; r < kVecDotRows; ++r) w[r] = static_cast<const BlockIq4Xs*>(w_rows[r]);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  __m128 sum = _mm_setzero_ps();
  for (int64_t i = 0; i < k / kQKK; ++i) {
    __m256i scales[kVecDotRows];
    __m512i acc[kVecDotRows];
    for (int r = 0; r < kVecDotRows; ++r) {
      prefetch_ahead(w[r] + i, sizeof(w[r][i]));
      scales[r] = iq4_xs_scale_pairs(w[r][i]);
      acc[r] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
      const __m512i x = _mm512_loadu_si512(a[i].qs + 64 * m);
#pragma GCC unroll 4
      for (int r = 0; r < kVecDotRows; ++r) {
        const Chunk q = chunk_of(w[r][i], m);
        const __m512i scale = chunk_scales(scales[r], m);
        const __m512i signed_x = _mm512_mask_sub_epi8(x, q.negative, _mm512_setzero_si512(), x);
        acc[r] = _mm512_dpwssd_epi32(acc[r], _mm512_maddubs_epi16(q.magnitude, signed_x), scale);
      }
    }
    __m256i dots[kVecDotRows];
    for (int r = 0; r < kVecDotRows; ++r)
      dots[r] =
          _mm256_add_epi32(_mm512_castsi512_si256(acc[r]), _mm512_extracti64x4_epi64(acc[r], 1));
    const __m128 wd = _mm_setr_ps(f16(w[0][i].d), f16(w[1][i].d), f16(w[2][i].d), f16(w[3][i].d));
    sum = _mm_add_ps(
        sum, _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(a[i].d), wd), _mm_cvtepi32_ps(hsum4_epi32(dots))));
  }
  _mm_storeu_ps(out, sum);
}

}  // namespace

VecDotRowsFn avx512_vec_dot_rows_iq4(DType weight) {
  return weight == DType::IQ4_XS ? dot_rows_iq4_xs : nullptr;
}

VecDotFn avx512_vec_dot_iq4(DType weight) {
  switch (weight) {
    case DType::IQ4_NL:
      return dot_lookup<BlockIq4Nl>;
    case DType::IQ4_XS:
      return dot_iq4_xs<Dots>;
    case DType::MXFP4:
      return dot_lookup<BlockMxfp4>;
    default:
      return nullptr;
  }
}

GemmTileFn avx512_gemm_tile_iq4(DType weight) {
  switch (weight) {
    case DType::IQ4_NL:
      return four_token_gemm_tile<BlockIq4Nl, BlockQ8_0, kQK, micro_lookup<BlockIq4Nl>>;
    case DType::IQ4_XS:
      return superblock_gemm_tile<BlockIq4Xs, micro_iq4_xs<Dots>>;
    case DType::MXFP4:
      return four_token_gemm_tile<BlockMxfp4, BlockQ8_0, kQK, micro_lookup<BlockMxfp4>>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
