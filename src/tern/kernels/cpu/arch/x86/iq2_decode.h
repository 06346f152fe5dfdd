// What the AVX2 and AVX-512 kernels of the IQ2 types ({avx2,avx512}/vec_dot_lattice.cpp) decode
// alike, with AVX2 (block_layouts.h's helpers in vectors): the 16 half sub-block scales, the 8
// sign words and a sub-block's magnitudes. Internal linkage, so each file compiles its own copy
// with its own flags.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/iq3_decode.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"

namespace tern::cpu {
namespace {

// 8 int32 lanes, lane j of 64 bytes' 16: the odd lanes (odd = 1) or the even ones, in order.
inline __m256i iq2_lanes_of(const void* p, int odd) {
  const auto* b = static_cast<const uint8_t*>(p);
  const __m256 lo = _mm256_castsi256_ps(load256(b)), hi = _mm256_castsi256_ps(load256(b + 32));
  // Per 128-bit half: lo's two, hi's two (sub-blocks 0, 1, 4, 5 | 2, 3, 6, 7), then in order.
  const __m256i mixed =
      _mm256_castps_si256(odd ? _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))
                              : _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
  return _mm256_permute4x64_epi64(mixed, _MM_SHUFFLE(3, 1, 2, 0));
}

// Lane j: sub-block j's scales 2 ls + 1, half 0 in the low int16, half 1 in the high.
inline __m256i lattice_scale_pairs(const BlockIq2Xxs& w) {
  const __m256i s = _mm256_or_si256(
      _mm256_slli_epi32(_mm256_srli_epi32(iq2_lanes_of(w.qs, 1), 28), 1), _mm256_set1_epi32(1));
  return _mm256_or_si256(s, _mm256_slli_epi32(s, 16));
}
// IQ2_XS, IQ2_S: half h's ls is nibble h of scales[j].
inline __m256i iq2_nibble_scale_pairs(const uint8_t* scales) {
  const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales)));
  const __m256i ls = _mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi32(0xf)),
                                     _mm256_slli_epi32(_mm256_srli_epi32(b, 4), 16));
  return _mm256_add_epi32(_mm256_slli_epi32(ls, 1), _mm256_set1_epi32(0x00010001));
}
inline __m256i lattice_scale_pairs(const BlockIq2Xs& w) { return iq2_nibble_scale_pairs(w.scales); }
inline __m256i lattice_scale_pairs(const BlockIq2S& w) { return iq2_nibble_scale_pairs(w.scales); }

// Whether both halves of a sub-block share one scale (IQ2_XXS, the IQ3 types): its pairs of
// lattice_scale_pairs then hold it twice, and need no shuffle to reach both halves.
template <typename Block>
constexpr bool kHalvesAlike =
    std::is_same_v<Block, BlockIq2Xxs> || std::is_same_v<Block, BlockIq3Xxs> ||
    std::is_same_v<Block, BlockIq3S>;

// Sub-block j's 16 int16 scales for vpmaddwd: lanes 0..7 half 0's, 8..15 half 1's.
template <typename Block>
inline __m256i lattice_sub_scales(__m256i pairs, int j) {
  const __m256i lane = _mm256_permutevar8x32_epi32(pairs, _mm256_set1_epi32(j));
  if constexpr (kHalvesAlike<Block>) return lane;
  return _mm256_shuffle_epi8(
      lane, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3,
                             2, 3, 2, 3, 2, 3, 2, 3));
}

// Lane j: sub-block j's sign word (bit e: element e negative). IQ2_XS's byte l: the top 7 bits of
// qs[4j + l] and their parity, in int16 lanes, then packed to bytes in order.
inline __m256i lattice_sign_words(const BlockIq2Xxs& w) {
  return parity_sign_words(iq2_lanes_of(w.qs, 1));
}
inline __m256i iq2_xs_sign_bytes16(const uint16_t* qs) {
  const __m256i b = _mm256_srli_epi16(load256(qs), 9);
  __m256i p = _mm256_xor_si256(b, _mm256_srli_epi16(b, 4));
  p = _mm256_xor_si256(p, _mm256_srli_epi16(p, 2));
  p = _mm256_xor_si256(p, _mm256_srli_epi16(p, 1));
  return _mm256_or_si256(b, _mm256_slli_epi16(_mm256_and_si256(p, _mm256_set1_epi16(1)), 7));
}
inline __m256i lattice_sign_words(const BlockIq2Xs& w) {
  const __m256i packed =
      _mm256_packus_epi16(iq2_xs_sign_bytes16(w.qs), iq2_xs_sign_bytes16(w.qs + 16));
  return _mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0));
}
inline __m256i lattice_sign_words(const BlockIq2S& w) { return load256(w.qs + kQKK / 8); }

// Sub-block j's 32 magnitudes, in element order (unsigned bytes, < 64): its 4 grid entries by
// scalar loads.
template <typename Block>
inline __m256i lattice_magnitudes(const Block& w, int j) {
  return _mm256_setr_epi64x(
      static_cast<long long>(lattice_grid(w, j, 0)), static_cast<long long>(lattice_grid(w, j, 1)),
      static_cast<long long>(lattice_grid(w, j, 2)), static_cast<long long>(lattice_grid(w, j, 3)));
}

}  // namespace
}  // namespace tern::cpu
