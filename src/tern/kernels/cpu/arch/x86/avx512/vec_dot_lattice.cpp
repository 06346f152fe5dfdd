// AVX-512 dot kernels of the lattice types' rows (IQ3, IQ2 and IQ1; see vec_dot_isa.h):
// avx2/vec_dot_lattice.cpp's arithmetic on two sub-blocks (64 elements) per instruction, and with
// it bit for bit the scalar twin of generic/vec_dot.cpp. The values' sign bits (the IQ3 and IQ2
// types' sign words, the IQ1 types' own) are the mask under which the activations are negated
// (never −128, quantize_row.h); the scales enter by VNNI's vpdpwssd.
#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/iq1_decode.h"
#include "tern/kernels/cpu/arch/x86/iq2_decode.h"
#include "tern/kernels/cpu/arch/x86/iq3_decode.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/arch/x86/superblock_steps.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

inline __m512i pair512(__m256i low, __m256i high) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

// The int16 scales of sub-blocks 2m and 2m + 1, 8 lanes a half, from lattice_scale_pairs.
template <typename Block>
inline __m512i chunk_scales(__m256i scale_pairs, int m) {
  const __m512i index = _mm512_add_epi32(
      _mm512_set1_epi32(2 * m), _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m512i pairs = _mm512_permutexvar_epi32(index, _mm512_castsi256_si512(scale_pairs));
  if constexpr (kHalvesAlike<Block>) return pairs;
  // Bytes 0, 1 of each lane (half 0) in the first and third 128-bit quarters, 2, 3 in the others.
  return _mm512_shuffle_epi8(
      pairs, _mm512_setr_epi64(0x0100010001000100, 0x0100010001000100, 0x0302030203020302,
                               0x0302030203020302, 0x0100010001000100, 0x0100010001000100,
                               0x0302030203020302, 0x0302030203020302));
}

// Sub-blocks 2m and 2m + 1 as the dots take them: |v|, the mask of v's negative elements, and
// their 32 int16 scales.
struct Chunk {
  __m512i magnitudes;
  __mmask64 negative;
  __m512i scales;
};

// sumi[c] = Σ (2 ls + 1) · Σ v · a_c over super-block i, in 8 int32 lanes; chunk(m) decodes
// sub-blocks 2m and 2m + 1.
template <int C, typename Chunks>
inline void lattice_dots(Chunks chunk, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
  __m512i acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const Chunk h = chunk(m);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m512i x = _mm512_loadu_si512(a[c][i].qs + 64 * m);
      const __m512i signed_x = _mm512_mask_sub_epi8(x, h.negative, _mm512_setzero_si512(), x);
      acc[c] = _mm512_dpwssd_epi32(acc[c], _mm512_maddubs_epi16(h.magnitudes, signed_x), h.scales);
    }
  }
  for (int c = 0; c < C; ++c)
    sumi[c] =
        _mm256_add_epi32(_mm512_castsi512_si256(acc[c]), _mm512_extracti64x4_epi64(acc[c], 1));
}

// The Dots of superblock_steps.h's lattice kernels.
struct Dots {
  // IQ3, IQ2: grid magnitudes under the sign words.
  template <int C, typename Block>
  static void lattice(const Block& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
    const __m256i scales = lattice_scale_pairs(w);
    alignas(32) uint64_t negative[4];  // bit e of word m: element 64m + e negative
    _mm256_store_si256(reinterpret_cast<__m256i*>(negative), lattice_sign_words(w));
    const auto chunk = [&](int m) {
      return Chunk{pair512(lattice_magnitudes(w, 2 * m), lattice_magnitudes(w, 2 * m + 1)),
                   _cvtu64_mask64(negative[m]), chunk_scales<Block>(scales, m)};
    };
    lattice_dots<C>(chunk, a, i, sumi);
  }
  template <int C, Iq1Block Block>
  static void lattice(const Block& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
    const auto chunk = [&](int m) {
      const __m512i v = pair512(iq1_values(w, 2 * m), iq1_values(w, 2 * m + 1));
      return Chunk{_mm512_abs_epi8(v), _mm512_movepi8_mask(v),
                   pair512(iq1_scales(w, 2 * m), iq1_scales(w, 2 * m + 1))};
    };
    lattice_dots<C>(chunk, a, i, sumi);
  }
};

}  // namespace

VecDotFn avx512_vec_dot_lattice(DType weight) { return lattice_vec_dot<Dots>(weight); }
GemmTileFn avx512_gemm_tile_lattice(DType weight) { return lattice_gemm_tile<Dots>(weight); }

}  // namespace tern::cpu
