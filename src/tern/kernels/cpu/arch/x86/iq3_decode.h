// What the AVX2 and AVX-512 kernels of IQ3_XXS and IQ3_S ({avx2,avx512}/vec_dot_lattice.cpp)
// decode alike, with AVX2 (block_layouts.h's helpers in vectors): the 8 sub-block scales, the 8
// sign words and a sub-block's magnitudes, named as the IQ2 types' (iq2_decode.h) so that one
// kernel serves both; and a sign word as a byte mask (the IQ2 types' too). Internal linkage, so
// each file compiles its own copy with its own flags.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"

namespace tern::cpu {
namespace {

// Lane j: 2 ls_j + 1 in both int16 halves, as vpmaddwd / vpdpwssd pair them: the IQ2 types'
// scales of the sub-block's two halves (iq2_decode.h), here alike.
inline __m256i iq3_pairs_of(__m256i ls) {
  const __m256i s = _mm256_add_epi32(_mm256_slli_epi32(ls, 1), _mm256_set1_epi32(1));
  return _mm256_or_si256(s, _mm256_slli_epi32(s, 16));
}
// IQ3_XXS: ls_j the top 4 bits of word j.
inline __m256i lattice_scale_pairs(const BlockIq3Xxs& w) {
  return iq3_pairs_of(_mm256_srli_epi32(load256(w.qs + kQKK / 4), 28));
}
// IQ3_S: ls_j nibble j of the 4 scale bytes (little-endian).
inline __m256i lattice_scale_pairs(const BlockIq3S& w) {
  uint32_t packed;
  std::memcpy(&packed, w.scales, sizeof packed);
  return iq3_pairs_of(
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(packed)),
                                         _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                       _mm256_set1_epi32(0xf)));
}

// Lane j: the sign word (bit e: element e negative) of the 4 × 7 sign bits at bits 7l.. of
// lane j of `words`, byte l those 7 bits and their parity (kLatticeSigns's rule, which the tests
// hold the table to): IQ3_XXS's and IQ2_XXS's.
inline __m256i parity_sign_words(__m256i words) {
  __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int l = 0; l < 4; ++l) {
    const __m256i b = _mm256_and_si256(_mm256_srli_epi32(words, 7 * l), _mm256_set1_epi32(127));
    __m256i p = _mm256_xor_si256(b, _mm256_srli_epi32(b, 4));
    p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 2));
    p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 1));
    const __m256i byte =
        _mm256_or_si256(b, _mm256_slli_epi32(_mm256_and_si256(p, _mm256_set1_epi32(1)), 7));
    s = _mm256_or_si256(s, _mm256_slli_epi32(byte, 8 * l));
  }
  return s;
}
// Lane j: sub-block j's sign word (bit e: element e negative).
inline __m256i lattice_sign_words(const BlockIq3Xxs& w) {
  return parity_sign_words(load256(w.qs + kQKK / 4));
}
inline __m256i lattice_sign_words(const BlockIq3S& w) { return load256(w.signs); }

// The grid indices of sub-block j's 8 groups, lane m group m.
inline __m256i iq3_indices(const BlockIq3Xxs& w, int j) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.qs + 8 * j)));
}
inline __m256i iq3_indices(const BlockIq3S& w, int j) {
  const __m256i high = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(w.qh[j]), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
      _mm256_set1_epi32(1));
  return _mm256_or_si256(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.qs + 8 * j))),
      _mm256_slli_epi32(high, 8));
}
inline const int* iq3_grid_of(const BlockIq3Xxs&) {
  return reinterpret_cast<const int*>(kIq3XxsGrid);
}
inline const int* iq3_grid_of(const BlockIq3S&) { return reinterpret_cast<const int*>(kIq3SGrid); }

// Group m of sub-block j's grid entry (block_layouts.h's lattice_grid).
inline int iq3_entry(const BlockIq3Xxs& w, int j, int m) {
  return static_cast<int>(kIq3XxsGrid[w.qs[8 * j + m]]);
}
inline int iq3_entry(const BlockIq3S& w, int j, int m) {
  return static_cast<int>(kIq3SGrid[w.qs[8 * j + m] | ((w.qh[j] >> m) & 1) << 8]);
}

// Sub-block j's 32 magnitudes, in element order (unsigned bytes, < 64): IQ3_XXS's by 8 scalar
// loads, which beat a gather of 8 there; IQ3_S's by a gather (its 9-bit indices are a vector's
// work).
inline __m256i lattice_magnitudes(const BlockIq3S& w, int j) {
  return _mm256_i32gather_epi32(iq3_grid_of(w), iq3_indices(w, j), 4);
}
inline __m256i lattice_magnitudes(const BlockIq3Xxs& w, int j) {
  return _mm256_setr_epi32(iq3_entry(w, j, 0), iq3_entry(w, j, 1), iq3_entry(w, j, 2),
                           iq3_entry(w, j, 3), iq3_entry(w, j, 4), iq3_entry(w, j, 5),
                           iq3_entry(w, j, 6), iq3_entry(w, j, 7));
}

// The sign word (bit e: element e negative) as a byte mask, 0xff where negative: byte e takes
// byte e / 8 of the word and keeps bit e % 8.
inline __m256i negative_bytes(__m256i word) {
  const __m256i spread =
      _mm256_shuffle_epi8(word, _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2,
                                                 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bits = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bits), bits);
}

}  // namespace
}  // namespace tern::cpu
