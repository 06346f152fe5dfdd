// The AVX2 dot and GEMM tile of tern's affine groups (INT4_G*, INT8_G*) against Q8_0
// activations: each 32-element block's integer sums by vpmaddubsw, exact, and then the scalar
// twin's float steps (quants/affine_group_dot.h), so the result is the scalar twin's bit for bit.
// The tile unpacks each weight block once for 4 tokens and sums each activation block once for
// all the tile's rows.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/quants/affine_group_dot.h"
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

// Block `sub` of a group's codes, unpacked once: 4-bit codes as bytes; 8-bit ones as their two
// nibbles (q = 16 · high + low), so that vpmaddubsw never saturates.
template <class B>
struct BlockCodes {
  __m256i low, high;
  BlockCodes(const B& w, int sub) {
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    if constexpr (B::kBitsPerCode == 4) {
      const __m128i x = load128(w.qs + sub * kQK / 2);
      low = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), low_mask);
      high = _mm256_setzero_si256();
    } else {
      const __m256i x = load256(w.qs + sub * kQK);
      low = _mm256_and_si256(x, low_mask);
      high = _mm256_and_si256(_mm256_srli_epi16(x, 4), low_mask);
    }
  }
  // Σ q · a in 8 lanes of partial sums.
  __m256i products(__m256i a) const {
    if constexpr (B::kBitsPerCode == 4) return dot_nibbles(low, a);
    return _mm256_add_epi32(dot_nibbles(low, a), _mm256_slli_epi32(dot_nibbles(high, a), 4));
  }
  int32_t dot(__m256i a) const { return hsum_epi32(products(a)); }
};

// The lane sums of four vectors at once, [Σa, Σb, Σc, Σd] (exact: integers).
inline __m128i hsum4_epi32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

inline int32_t block_sum(__m256i a) { return hsum_epi32(dot_nibbles(_mm256_set1_epi8(1), a)); }

template <class B>
float dot_affine(int64_t k, const void* w, const void* a) {
  return affine_group_dot<B>(k, w, a, [](const B& wg, int sub, const BlockQ8_0& ab) {
    const __m256i av = load256(ab.qs);
    return AffineBlockSums{BlockCodes<B>(wg, sub).dot(av), block_sum(av)};
  });
}

constexpr int kTileTokens = 4;

template <class B>
void gemm_tile(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data,
               size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const int64_t blocks = k / kQK;
  // Σ a of each activation block, once per token for all rows: [blocks, kTileTokens].
  thread_local std::vector<int32_t> asums;
  if (asums.size() < static_cast<size_t>(kTileTokens * blocks))
    asums.resize(static_cast<size_t>(kTileTokens * blocks));
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  for (int64_t t0 = 0; t0 < tokens; t0 += kTileTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kTileTokens, tokens - t0));
    // A last tile of fewer tokens repeats its first one (its results are not written).
    const BlockQ8_0* a[kTileTokens];
    for (int t = 0; t < kTileTokens; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_0*>(abytes + (t0 + (t < nt ? t : 0)) * a_stride);
      for (int64_t b = 0; b < blocks; ++b)
        asums[static_cast<size_t>(b * kTileTokens + t)] = block_sum(load256(a[t][b].qs));
    }
    for (int64_t r = 0; r < rows; ++r) {
      const auto* w = reinterpret_cast<const B*>(wbytes + r * w_stride);
      float out[kTileTokens];
      affine_group_dots<B, kTileTokens>(
          k, w, a,
          [&](const B& wg, int sub, int64_t b, int32_t* isum, int32_t* asum) {
            const BlockCodes<B> codes(wg, sub);
            const __m128i sums = hsum4_epi32(
                codes.products(load256(a[0][b].qs)), codes.products(load256(a[1][b].qs)),
                codes.products(load256(a[2][b].qs)), codes.products(load256(a[3][b].qs)));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(isum), sums);
            std::memcpy(asum, &asums[static_cast<size_t>(b * kTileTokens)],
                        sizeof(int32_t) * kTileTokens);
          },
          out);
      for (int t = 0; t < nt; ++t) y[(t0 + t) * static_cast<int64_t>(ldy) + r] = out[t];
    }
  }
}

}  // namespace

VecDotFn avx2_vec_dot_affine(DType weight) {
  return with_affine_block<VecDotFn>(weight, []<class B>() -> VecDotFn { return dot_affine<B>; });
}

GemmTileFn avx2_gemm_tile_affine(DType weight) {
  return with_affine_block<GemmTileFn>(weight,
                                       []<class B>() -> GemmTileFn { return gemm_tile<B>; });
}

}  // namespace tern::cpu
