// AVX-512 dot kernels of IQ4_XS rows against Q8_K activation rows (see vec_dot_isa.h):
// avx2/vec_dot_iq4.cpp's arithmetic on two sub-blocks (64 elements) per instruction, and with it
// bit for bit the scalar twin of generic/vec_dot.cpp. AVX-512 has no vpsignb: the activations
// are negated under the mask of the negative levels instead (never −128, quantize_row.h). The
// sub-block scales enter by VNNI's vpdpwssd. (IQ4_NL keeps the Avx2 level's kernels.)
#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/arch/x86/superblock_steps.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// Sub-blocks 2m and 2m + 1 (elements 64m..64m+63) as |level| and the mask of negative levels.
struct Chunk {
  __m512i magnitude;
  __mmask64 negative;
};
inline Chunk chunk_of(const BlockIq4Xs& w, int m) {
  const __m256i x = load256(w.qs + 32 * m);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  // 128-bit lanes: the low nibbles of sub-block 2m, its high nibbles, then sub-block 2m + 1's.
  const __m512i lo_hi = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(x, nibble)),
                                           _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble), 1);
  const __m512i nibbles = _mm512_shuffle_i64x2(lo_hi, lo_hi, _MM_SHUFFLE(3, 1, 2, 0));
  const __m512i q = _mm512_shuffle_epi8(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Levels))),
      nibbles);
  return {_mm512_abs_epi8(q), _mm512_movepi8_mask(q)};
}

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
  return weight == DType::IQ4_XS ? dot_iq4_xs<Dots> : nullptr;
}

GemmTileFn avx512_gemm_tile_iq4(DType weight) {
  return weight == DType::IQ4_XS ? superblock_gemm_tile<BlockIq4Xs, micro_iq4_xs<Dots>> : nullptr;
}

}  // namespace tern::cpu
