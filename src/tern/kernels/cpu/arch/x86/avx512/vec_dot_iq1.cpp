// AVX-512 dot kernels of IQ1_S and IQ1_M rows (see vec_dot_isa.h): avx2/vec_dot_iq1.cpp's
// arithmetic on two sub-blocks (64 elements) per instruction, and with it bit for bit the scalar
// twin of generic/vec_dot.cpp. The values' sign bits are the mask under which the activations are
// negated (never −128, quantize_row.h); the scales enter by VNNI's vpdpwssd.
#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/iq1_decode.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/arch/x86/superblock_steps.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

inline __m512i pair512(__m256i low, __m256i high) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

// sumi[c] = Σ (2 ls + 1) · Σ (8 g + δ) · a_c over super-block i, in 8 int32 lanes.
template <int C, typename Block>
inline void iq1_dots(const Block& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
  __m512i acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const __m512i v = pair512(iq1_values(w, 2 * m), iq1_values(w, 2 * m + 1));
    const __m512i magnitude = _mm512_abs_epi8(v);
    const __mmask64 negative = _mm512_movepi8_mask(v);
    const __m512i scale = pair512(iq1_scales(w, 2 * m), iq1_scales(w, 2 * m + 1));
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m512i x = _mm512_loadu_si512(a[c][i].qs + 64 * m);
      const __m512i signed_x = _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x);
      acc[c] = _mm512_dpwssd_epi32(acc[c], _mm512_maddubs_epi16(magnitude, signed_x), scale);
    }
  }
  for (int c = 0; c < C; ++c)
    sumi[c] =
        _mm256_add_epi32(_mm512_castsi512_si256(acc[c]), _mm512_extracti64x4_epi64(acc[c], 1));
}

// The Dots of superblock_steps.h's IQ1 kernels.
struct Dots {
  template <int C, typename Block>
  static void iq1(const Block& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
    iq1_dots<C>(w, a, i, sumi);
  }
};

}  // namespace

VecDotFn avx512_vec_dot_iq1(DType weight) { return iq1_vec_dot<Dots>(weight); }
GemmTileFn avx512_gemm_tile_iq1(DType weight) { return iq1_gemm_tile<Dots>(weight); }

}  // namespace tern::cpu
