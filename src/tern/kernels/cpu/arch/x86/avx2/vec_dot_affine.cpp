// The AVX2 dot of tern's affine groups (INT4_G*, INT8_G*) against Q8_0 activations: each
// 32-element block's integer sums by vpmaddubsw, exact, and then the scalar twin's float steps
// (quants/affine_group_dot.h), so the result is the scalar twin's bit for bit.
#include <immintrin.h>

#include <cstdint>

#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/quants/affine_group_dot.h"
#include "tern/kernels/cpu/quants/quant_blocks.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// Σ u · a over 32 bytes, u in 0..15: vpmaddubsw cannot saturate (2 · 15 · 128 < 32767).
inline __m256i dot_nibbles(__m256i u, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
}

// Block `sub` of a group: Σ q · a, 8-bit codes as their two nibbles (q = 16 · high + low).
template <class B>
inline int32_t block_isum(const B& w, int sub, __m256i a) {
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  if constexpr (B::kBitsPerCode == 4) {
    const __m128i x = load128(w.qs + sub * kQK / 2);
    const __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), low_mask);
    return hsum_epi32(dot_nibbles(u, a));
  } else {
    const __m256i x = load256(w.qs + sub * kQK);
    const __m256i low = _mm256_and_si256(x, low_mask);
    const __m256i high = _mm256_and_si256(_mm256_srli_epi16(x, 4), low_mask);
    return hsum_epi32(
        _mm256_add_epi32(dot_nibbles(low, a), _mm256_slli_epi32(dot_nibbles(high, a), 4)));
  }
}

template <class B>
float dot_affine(int64_t k, const void* w, const void* a) {
  const __m256i ones = _mm256_set1_epi8(1);
  return affine_group_dot<B>(k, w, a, [&](const B& wg, int sub, const BlockQ8_0& ab) {
    const __m256i av = load256(ab.qs);
    return AffineBlockSums{block_isum(wg, sub, av), hsum_epi32(dot_nibbles(ones, av))};
  });
}

}  // namespace

VecDotFn avx2_vec_dot_affine(DType weight) {
  return with_affine_block<VecDotFn>(weight, []<class B>() -> VecDotFn { return dot_affine<B>; });
}

}  // namespace tern::cpu
