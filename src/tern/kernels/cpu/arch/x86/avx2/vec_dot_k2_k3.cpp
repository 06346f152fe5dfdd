// AVX2 dot kernels of Q2_K and Q3_K rows against Q8_K activation rows (see vec_dot_isa.h),
// bit for bit the scalar twins of generic/vec_dot.cpp.
//
// The scalar twin meets the floats once per super-block: an exact int32 sum of the super-block,
// then `sum += (a.d · d) · sumi − (a.d · dmin) · summ`. These kernels compute the same int32 sums
// in vectors (any order gives the same integer), reduce them to one lane per super-block, and do
// the same float operations in the same order (superblock_steps.h), so every token count of the
// tile gives the scalar twin's bits.
//
// Both types keep 2 low bits per element in qs: in half h of the super-block (128 elements), bits
// 2g..2g+1 of qs[32h + l] are element 128h + 32g + l. So the 32 bytes of a half shifted right by
// 2g and masked are the 32 elements of chunk (h, g), and its low 128-bit lane holds sub-block
// 8h + 2g, its high lane sub-block 8h + 2g + 1.
//
// int16 bounds of `maddubs` (never saturates): q ≤ 7 (Q3_K as stored), |a| ≤ 127 → 2·7·127.
#include <immintrin.h>

#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/arch/x86/superblock_steps.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// Chunk c (< 4) of a half takes int16 scale 2c over its low lane and 2c + 1 over its high lane;
// sc_half holds the half's 8 scales in both lanes.
inline __m256i chunk_scales(__m256i sc_half, int c) {
  const auto lo = static_cast<char>(4 * c), hi = static_cast<char>(4 * c + 2);
  return _mm256_shuffle_epi8(
      sc_half, _mm256_setr_epi8(lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo,
                                lo + 1, lo, lo + 1, lo, lo + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1,
                                hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1));
}

// A super-block's quants, unsigned, chunk by chunk: chunk(h, g) is the 32 elements of (h, g)
// above. Unpacked as the chunks are multiplied (chunk-outer, tokens inner), so that only one
// chunk and its scales are live beside the tokens' accumulators.
struct Q2Source {
  __m256i bits[2];
  explicit Q2Source(const BlockQ2_K& w) : bits{load256(w.qs), load256(w.qs + 32)} {}
  __m256i chunk(int h, int g) const {
    return _mm256_and_si256(_mm256_srl_epi16(bits[h], _mm_cvtsi32_si128(2 * g)),
                            _mm256_set1_epi8(3));
  }
};

// Q3_K as stored: q + 4 in 0..7, the third bit (bit 4h + g of hmask[l]) set for q ≥ 0.
struct Q3Source {
  __m256i bits[2], hmask;
  explicit Q3Source(const BlockQ3_K& w)
      : bits{load256(w.qs), load256(w.qs + 32)}, hmask(load256(w.hmask)) {}
  __m256i chunk(int h, int g) const {
    const __m256i q2 =
        _mm256_and_si256(_mm256_srl_epi16(bits[h], _mm_cvtsi32_si128(2 * g)), _mm256_set1_epi8(3));
    // Bit 4h + g of each hmask byte to bit 2: a 16-bit shift, whose carry from the neighbour
    // byte lands in masked-off bits.
    const int shift = 4 * h + g - 2;
    const __m256i hb = shift >= 0 ? _mm256_srl_epi16(hmask, _mm_cvtsi32_si128(shift))
                                  : _mm256_sll_epi16(hmask, _mm_cvtsi32_si128(-shift));
    return _mm256_or_si256(q2, _mm256_and_si256(hb, _mm256_set1_epi8(4)));
  }
};

// sumi[c] = Σ_j sc_j · Σ_l q[16j + l] · a_c[16j + l] over super-block i, in 8 int32 lanes, for
// C tokens' activation rows a[c].
template <int C, typename Source>
inline void scaled_dots(const Source& q, __m256i sc16, const BlockQ8_K* const* a, int64_t i,
                        __m256i* sumi) {
  for (int c = 0; c < C; ++c) sumi[c] = _mm256_setzero_si256();
  const __m256i sc_halves[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                                _mm256_permute2x128_si256(sc16, sc16, 0x11)};
  for (int h = 0; h < 2; ++h) {
    const __m256i sc_half = sc_halves[h];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const __m256i chunk = q.chunk(h, g), s = chunk_scales(sc_half, g);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const __m256i p = _mm256_maddubs_epi16(chunk, load256(a[c][i].qs + 128 * h + 32 * g));
        sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(p, s));
      }
    }
  }
}

// The Dots of superblock_steps.h's kernels.
struct Dots {
  template <int C>
  static void q2(const BlockQ2_K& w, __m256i sc16, const BlockQ8_K* const* a, int64_t i,
                 __m256i* sumi) {
    scaled_dots<C>(Q2Source(w), sc16, a, i, sumi);
  }
  template <int C>
  static void q3(const BlockQ3_K& w, __m256i sc16, const BlockQ8_K* const* a, int64_t i,
                 __m256i* sumi) {
    scaled_dots<C>(Q3Source(w), sc16, a, i, sumi);
  }
};

}  // namespace

VecDotFn avx2_vec_dot_k2_k3(DType weight) { return k2_k3_vec_dot<Dots>(weight); }

GemmTileFn avx2_gemm_tile_k2_k3(DType weight) { return k2_k3_gemm_tile_of<Dots>(weight); }

}  // namespace tern::cpu
