// AVX2 dot kernels of IQ3_XXS and IQ3_S rows (see vec_dot_isa.h): superblock_steps.h's GEMV and
// tile over these integer dots, bit for bit the scalar twin of generic/vec_dot.cpp. A sub-block's
// 8 grid entries (4 magnitudes each, 32 bytes in element order) come by one gather; its 32 sign
// bits become a byte mask that negates the activations (never −128, quantize_row.h), so that
// vpmaddubsw takes the magnitudes as its unsigned side: a pair of products is within int16
// (2 · 62 · 127). The scales 2 ls + 1 enter by vpmaddwd.
#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/iq3_decode.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/arch/x86/superblock_steps.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// sumi[c] = Σ_j (2 ls_j + 1) · Σ ±m · a_c over super-block i, in 8 int32 lanes.
template <int C, typename Block>
inline void iq3_dots(const Block& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
  const __m256i scales = iq3_scale_pairs(w), signs = iq3_sign_words(w);
  for (int c = 0; c < C; ++c) sumi[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const __m256i lane = _mm256_set1_epi32(j);
    const __m256i m = iq3_magnitudes(w, j);
    const __m256i negative = _mm256_or_si256(
        negative_bytes(_mm256_permutevar8x32_epi32(signs, lane)), _mm256_set1_epi8(1));
    const __m256i scale = _mm256_permutevar8x32_epi32(scales, lane);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m256i x = _mm256_sign_epi8(load256(a[c][i].qs + kQK * j), negative);
      sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(_mm256_maddubs_epi16(m, x), scale));
    }
  }
}

// The Dots of superblock_steps.h's IQ3 kernels.
struct Dots {
  template <int C, typename Block>
  static void iq3(const Block& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
    iq3_dots<C>(w, a, i, sumi);
  }
};

}  // namespace

VecDotFn avx2_vec_dot_iq3(DType weight) { return iq3_vec_dot<Dots>(weight); }
GemmTileFn avx2_gemm_tile_iq3(DType weight) { return iq3_gemm_tile<Dots>(weight); }

}  // namespace tern::cpu
