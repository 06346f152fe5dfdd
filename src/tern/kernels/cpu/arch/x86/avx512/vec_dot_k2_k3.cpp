// AVX-512 dot kernels of Q2_K and Q3_K rows against Q8_K activation rows (see vec_dot_isa.h):
// avx2/vec_dot_k2_k3.cpp's arithmetic on 64 elements per instruction, and with it bit for bit
// the scalar twins of generic/vec_dot.cpp (exact int32 sums, then superblock_steps.h's float step).
//
// Register m (< 4) holds elements 64m..64m+63 of the super-block: in qs's 2-bit planes (see the
// AVX2 file) that is half h = m / 2, groups g = 2 (m % 2) and g + 1, one per 256-bit half, each
// the half's 32 bytes shifted right by 2g and masked. Its 128-bit lanes are sub-blocks 4m..4m+3.
// `maddubs` then VNNI's `dpwssd` (madd and add in one) fold in each sub-block's int16 scale.
#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/arch/x86/superblock_steps.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// The 16-bit shift that brings group g (low half) and g + 1 (high half) to bits 0-1.
inline __m512i group_shifts(int m) {
  const int g = 2 * (m % 2);
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(2 * g)),
                            _mm256_set1_epi16(static_cast<int16_t>(2 * g + 2)), 1);
}

inline __m512i low_bits(const uint8_t* qs, int m) {
  const __m512i half = _mm512_broadcast_i64x4(load256(qs + 32 * (m / 2)));
  return _mm512_and_si512(_mm512_srlv_epi16(half, group_shifts(m)), _mm512_set1_epi8(3));
}

struct Q2Source {
  const BlockQ2_K& w;
  __m512i chunk(int m) const { return low_bits(w.qs, m); }
};

// Q3_K as stored: q + 4 in 0..7, the third bit (bit 4h + g of hmask[l]) set for q ≥ 0.
struct Q3Source {
  const BlockQ3_K& w;
  __m512i chunk(int m) const {
    const int b = 4 * (m / 2) + 2 * (m % 2);  // the low half's bit; the high half's is b + 1
    const __m512i select = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << b)),
                                              _mm256_set1_epi8(static_cast<char>(1 << (b + 1))), 1);
    const __mmask64 high = _mm512_test_epi8_mask(_mm512_broadcast_i64x4(load256(w.hmask)), select);
    const __m512i q2 = low_bits(w.qs, m);
    return _mm512_mask_add_epi8(q2, high, q2, _mm512_set1_epi8(4));
  }
};

// Word n of register m multiplies by the scale of sub-block 4m + n / 8.
inline __m512i chunk_scales(__m512i sc16, int m) {
  const __m512i index = _mm512_add_epi16(
      _mm512_set1_epi16(static_cast<int16_t>(4 * m)),
      _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                         16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                        3));
  return _mm512_permutexvar_epi16(index, sc16);
}

// sumi[c] = Σ_j sc_j · Σ_l q[16j + l] · a_c[16j + l] over super-block i, in 8 int32 lanes, for
// C tokens' activation rows a[c]; sc16: the 16 int16 scales.
template <int C, typename Source>
inline void scaled_dots(const Source& q, __m256i sc16, const BlockQ8_K* const* a, int64_t i,
                        __m256i* sumi) {
  __m512i acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_si512();
  const __m512i sc = _mm512_castsi256_si512(sc16);
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const __m512i chunk = q.chunk(m), s = chunk_scales(sc, m);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m512i p = _mm512_maddubs_epi16(chunk, _mm512_loadu_si512(a[c][i].qs + 64 * m));
      acc[c] = _mm512_dpwssd_epi32(acc[c], p, s);
    }
  }
  for (int c = 0; c < C; ++c)
    sumi[c] =
        _mm256_add_epi32(_mm512_castsi512_si256(acc[c]), _mm512_extracti64x4_epi64(acc[c], 1));
}

// The Dots of superblock_steps.h's kernels.
struct Dots {
  template <int C>
  static void q2(const BlockQ2_K& w, __m256i sc16, const BlockQ8_K* const* a, int64_t i,
                 __m256i* sumi) {
    scaled_dots<C>(Q2Source{w}, sc16, a, i, sumi);
  }
  template <int C>
  static void q3(const BlockQ3_K& w, __m256i sc16, const BlockQ8_K* const* a, int64_t i,
                 __m256i* sumi) {
    scaled_dots<C>(Q3Source{w}, sc16, a, i, sumi);
  }
};

// ---- The GEMV's four streams side by side (vec_dot_rows) --------------------------------------
//
// Four rows against one activation row: each activation chunk is loaded once for the four, the
// rows' int32 sums are reduced together, and the four rows' sums are advanced by the scalar
// twin's float step lane by lane (lane r row r: the same IEEE operations on the same values).

// sumi[r] for the rows' super-blocks w[r][i] (Sources built from them) against a[i].
template <typename Source, typename Block>
inline void row_dots(const Block* const* w, const BlockQ8_K& a, int64_t i, const __m256i* sc16,
                     __m256i* sumi) {
  __m512i acc[kVecDotRows];
  for (int r = 0; r < kVecDotRows; ++r) acc[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const __m512i x = _mm512_loadu_si512(a.qs + 64 * m);
#pragma GCC unroll 4
    for (int r = 0; r < kVecDotRows; ++r) {
      const __m512i p = _mm512_maddubs_epi16(Source{w[r][i]}.chunk(m), x);
      acc[r] = _mm512_dpwssd_epi32(acc[r], p, chunk_scales(_mm512_castsi256_si512(sc16[r]), m));
    }
  }
  for (int r = 0; r < kVecDotRows; ++r)
    sumi[r] =
        _mm256_add_epi32(_mm512_castsi512_si256(acc[r]), _mm512_extracti64x4_epi64(acc[r], 1));
}

template <typename Block>
inline __m128 row_halves(const Block* const* w, int64_t i, uint16_t Block::*field) {
  return _mm_setr_ps(f16(w[0][i].*field), f16(w[1][i].*field), f16(w[2][i].*field),
                     f16(w[3][i].*field));
}

void dot_rows_q2_k(int64_t k, const void* const* w_rows, const void* a_row, float* out) {
  const BlockQ2_K* w[kVecDotRows];
  for (int r = 0; r < kVecDotRows; ++r) w[r] = static_cast<const BlockQ2_K*>(w_rows[r]);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  __m128 sum = _mm_setzero_ps();
  for (int64_t i = 0; i < k / kQKK; ++i) {
    __m256i sc16[kVecDotRows], dots[kVecDotRows], mins[kVecDotRows];
    for (int r = 0; r < kVecDotRows; ++r) {
      prefetch_ahead(w[r] + i, sizeof(w[r][i]));
      sc16[r] = q2_scales16(w[r][i]);
      mins[r] = q2_mins_dot(q2_mins16(w[r][i]), a[i]);
    }
    row_dots<Q2Source>(w, a[i], i, sc16, dots);
    const __m128 ad = _mm_set1_ps(a[i].d);
    const __m128 x = _mm_mul_ps(_mm_mul_ps(ad, row_halves(w, i, &BlockQ2_K::d)),
                                _mm_cvtepi32_ps(hsum4_epi32(dots)));
    const __m128 y = _mm_mul_ps(_mm_mul_ps(ad, row_halves(w, i, &BlockQ2_K::dmin)),
                                _mm_cvtepi32_ps(hsum4_epi32(mins)));
    sum = _mm_add_ps(sum, _mm_sub_ps(x, y));
  }
  _mm_storeu_ps(out, sum);
}

void dot_rows_q3_k(int64_t k, const void* const* w_rows, const void* a_row, float* out) {
  const BlockQ3_K* w[kVecDotRows];
  for (int r = 0; r < kVecDotRows; ++r) w[r] = static_cast<const BlockQ3_K*>(w_rows[r]);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  __m128 sum = _mm_setzero_ps();
  for (int64_t i = 0; i < k / kQKK; ++i) {
    __m256i sc16[kVecDotRows], dots[kVecDotRows];
    for (int r = 0; r < kVecDotRows; ++r) {
      prefetch_ahead(w[r] + i, sizeof(w[r][i]));
      sc16[r] = q3_scales16(w[r][i]);
    }
    row_dots<Q3Source>(w, a[i], i, sc16, dots);
    for (int r = 0; r < kVecDotRows; ++r)
      dots[r] = _mm256_sub_epi32(dots[r], q3_offset(sc16[r], a[i]));
    const __m128 x = _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(a[i].d), row_halves(w, i, &BlockQ3_K::d)),
                                _mm_cvtepi32_ps(hsum4_epi32(dots)));
    sum = _mm_add_ps(sum, x);
  }
  _mm_storeu_ps(out, sum);
}

}  // namespace

VecDotFn avx512_vec_dot_k2_k3(DType weight) { return k2_k3_vec_dot<Dots>(weight); }

VecDotRowsFn avx512_vec_dot_rows_k2_k3(DType weight) {
  switch (weight) {
    case DType::Q2_K:
      return dot_rows_q2_k;
    case DType::Q3_K:
      return dot_rows_q3_k;
    default:
      return nullptr;
  }
}

GemmTileFn avx512_gemm_tile_k2_k3(DType weight) { return k2_k3_gemm_tile_of<Dots>(weight); }

}  // namespace tern::cpu
