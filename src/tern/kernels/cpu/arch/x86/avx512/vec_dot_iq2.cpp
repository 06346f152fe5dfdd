// AVX-512 dot kernels of IQ2_XXS, IQ2_XS and IQ2_S rows (see vec_dot_isa.h): avx2/vec_dot_iq2.cpp's
// arithmetic on two sub-blocks (64 elements) per instruction, and with it bit for bit the scalar
// twin of generic/vec_dot.cpp. Their 64 sign bits are the mask under which the activations are
// negated (never −128, quantize_row.h); the half sub-blocks' scales enter by VNNI's vpdpwssd.
#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/iq2_decode.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/arch/x86/superblock_steps.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// Sub-blocks 2m and 2m + 1's 64 magnitudes, in element order.
template <typename Block>
inline __m512i iq2_chunk_magnitudes(const Block& w, int m) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(iq2_magnitudes(w, 2 * m)),
                            iq2_magnitudes(w, 2 * m + 1), 1);
}

// The int16 scales of sub-blocks 2m and 2m + 1, 8 lanes a half, from iq2_scale_pairs.
inline __m512i iq2_chunk_scales(__m256i scale_pairs, int m) {
  const __m512i index = _mm512_add_epi32(
      _mm512_set1_epi32(2 * m), _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m512i pairs = _mm512_permutexvar_epi32(index, _mm512_castsi256_si512(scale_pairs));
  // Bytes 0, 1 of each lane (half 0) in the first and third 128-bit quarters, 2, 3 in the others.
  return _mm512_shuffle_epi8(
      pairs, _mm512_setr_epi64(0x0100010001000100, 0x0100010001000100, 0x0302030203020302,
                               0x0302030203020302, 0x0100010001000100, 0x0100010001000100,
                               0x0302030203020302, 0x0302030203020302));
}

// sumi[c] = Σ_j Σ_h (2 ls + 1) · Σ ±m · a_c over super-block i, in 8 int32 lanes.
template <int C, typename Block>
inline void iq2_dots(const Block& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
  const __m256i scales = iq2_scale_pairs(w);
  alignas(32) uint64_t negative[4];  // bit e of word m: element 64m + e negative
  _mm256_store_si256(reinterpret_cast<__m256i*>(negative), iq2_sign_words(w));
  __m512i acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const __m512i mags = iq2_chunk_magnitudes(w, m);
    const __m512i scale = iq2_chunk_scales(scales, m);
    const __mmask64 mask = _cvtu64_mask64(negative[m]);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m512i x = _mm512_loadu_si512(a[c][i].qs + 64 * m);
      const __m512i signed_x = _mm512_mask_sub_epi8(x, mask, _mm512_setzero_si512(), x);
      acc[c] = _mm512_dpwssd_epi32(acc[c], _mm512_maddubs_epi16(mags, signed_x), scale);
    }
  }
  for (int c = 0; c < C; ++c)
    sumi[c] =
        _mm256_add_epi32(_mm512_castsi512_si256(acc[c]), _mm512_extracti64x4_epi64(acc[c], 1));
}

// The Dots of superblock_steps.h's IQ2 kernels.
struct Dots {
  template <int C, typename Block>
  static void iq2(const Block& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
    iq2_dots<C>(w, a, i, sumi);
  }
};

}  // namespace

VecDotFn avx512_vec_dot_iq2(DType weight) { return iq2_vec_dot<Dots>(weight); }
GemmTileFn avx512_gemm_tile_iq2(DType weight) { return iq2_gemm_tile<Dots>(weight); }

}  // namespace tern::cpu
