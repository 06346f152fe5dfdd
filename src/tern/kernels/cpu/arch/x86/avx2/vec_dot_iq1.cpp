// AVX2 dot kernels of IQ1_S and IQ1_M rows (see vec_dot_isa.h): superblock_steps.h's GEMV and
// tile over these integer dots, bit for bit the scalar twin of generic/vec_dot.cpp. A sub-block's
// 32 values v = 8 g + δ (iq1_decode.h) are decoded once for all tokens; vpmaddubsw takes |v| as
// its unsigned side and the activations with v's signs (vpsignb: v is never 0, the activations
// never −128), a pair of products within int16 (2 · 9 · 127); the scales 2 ls + 1 enter by
// vpmaddwd.
#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/iq1_decode.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/arch/x86/superblock_steps.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// sumi[c] = Σ (2 ls + 1) · Σ (8 g + δ) · a_c over super-block i, in 8 int32 lanes.
template <int C, typename Block>
inline void iq1_dots(const Block& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
  for (int c = 0; c < C; ++c) sumi[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const __m256i v = iq1_values(w, j);
    const __m256i magnitude = _mm256_abs_epi8(v);
    const __m256i scale = iq1_scales(w, j);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m256i x = _mm256_sign_epi8(load256(a[c][i].qs + kQK * j), v);
      sumi[c] =
          _mm256_add_epi32(sumi[c], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, x), scale));
    }
  }
}

// The Dots of superblock_steps.h's IQ1 kernels.
struct Dots {
  template <int C, typename Block>
  static void iq1(const Block& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
    iq1_dots<C>(w, a, i, sumi);
  }
};

}  // namespace

VecDotFn avx2_vec_dot_iq1(DType weight) { return iq1_vec_dot<Dots>(weight); }
GemmTileFn avx2_gemm_tile_iq1(DType weight) { return iq1_gemm_tile<Dots>(weight); }

}  // namespace tern::cpu
