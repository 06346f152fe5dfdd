// AVX2 dot kernels of the lattice types' rows, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and
// IQ1_M (see vec_dot_isa.h): superblock_steps.h's GEMV and tile over these integer dots, bit for
// bit the scalar twin of generic/vec_dot.cpp. A sub-block's 32 values v are decoded once for all
// tokens: vpmaddubsw takes |v| as its unsigned side and the activations with v's signs (vpsignb:
// v is never 0, the activations never −128, quantize_row.h), a pair of products within int16
// (2 · 62 · 127); the scales 2 ls + 1 enter by vpmaddwd. The IQ3 and IQ2 types' |v| are grid
// entries (IQ3_S's by a gather, the others' by scalar loads), their signs a word a sub-block
// turned into a byte mask; the IQ1 types' v = 8 g + δ carry their signs (iq1_decode.h).
#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/iq1_decode.h"
#include "tern/kernels/cpu/arch/x86/iq2_decode.h"
#include "tern/kernels/cpu/arch/x86/iq3_decode.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/arch/x86/superblock_steps.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// A sub-block as the dots take it: |v|, an operand for vpsignb with v's signs (never 0), and its
// 16 int16 scales.
struct SubBlock {
  __m256i magnitudes, signs, scales;
};

// sumi[c] = Σ (2 ls + 1) · Σ v · a_c over super-block i, in 8 int32 lanes; sub_block(j) decodes
// sub-block j.
template <int C, typename SubBlocks>
inline void lattice_dots(SubBlocks sub_block, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
  for (int c = 0; c < C; ++c) sumi[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const SubBlock s = sub_block(j);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m256i x = _mm256_sign_epi8(load256(a[c][i].qs + kQK * j), s.signs);
      sumi[c] = _mm256_add_epi32(
          sumi[c], _mm256_madd_epi16(_mm256_maddubs_epi16(s.magnitudes, x), s.scales));
    }
  }
}

// The Dots of superblock_steps.h's lattice kernels.
struct Dots {
  // IQ3, IQ2: grid magnitudes under a sign word; the scales and sign words of the whole
  // super-block in one vector each.
  template <int C, typename Block>
  static void lattice(const Block& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
    const __m256i scales = lattice_scale_pairs(w), signs = lattice_sign_words(w);
    const auto sub_block = [&](int j) {
      const __m256i word = _mm256_permutevar8x32_epi32(signs, _mm256_set1_epi32(j));
      return SubBlock{lattice_magnitudes(w, j),
                      _mm256_or_si256(negative_bytes(word), _mm256_set1_epi8(1)),
                      lattice_sub_scales<Block>(scales, j)};
    };
    lattice_dots<C>(sub_block, a, i, sumi);
  }
  template <int C, Iq1Block Block>
  static void lattice(const Block& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
    const auto sub_block = [&](int j) {
      const __m256i v = iq1_values(w, j);
      return SubBlock{_mm256_abs_epi8(v), v, iq1_scales(w, j)};
    };
    lattice_dots<C>(sub_block, a, i, sumi);
  }
};

}  // namespace

VecDotFn avx2_vec_dot_lattice(DType weight) { return lattice_vec_dot<Dots>(weight); }
GemmTileFn avx2_gemm_tile_lattice(DType weight) { return lattice_gemm_tile<Dots>(weight); }

}  // namespace tern::cpu
