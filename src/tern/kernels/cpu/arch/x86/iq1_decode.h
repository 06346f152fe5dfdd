// What the AVX2 and AVX-512 kernels of IQ1_S and IQ1_M ({avx2,avx512}/vec_dot_lattice.cpp)
// decode alike, with AVX2 (block_layouts.h's helpers in vectors): a sub-block's 32 values 8 g + δ
// and its scales. Internal linkage, so each file compiles its own copy with its own flags.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "tern/blocks/block_layouts.h"

namespace tern::cpu {
namespace {

// The IQ1 types: their values carry their own signs, where the other lattice types' kernels take
// a sign word beside unsigned grid magnitudes.
template <typename Block>
concept Iq1Block = std::is_same_v<Block, BlockIq1S> || std::is_same_v<Block, BlockIq1M>;

// Sub-block j's 4 group deltas δ (±1), each over its group's 8 bytes.
inline __m256i iq1_deltas(const BlockIq1S& w, int j) {
  return _mm256_set1_epi8(static_cast<char>(1 - ((w.qh[j] >> 14) & 2)));
}
inline __m256i iq1_deltas(const BlockIq1M& w, int j) {
  // Group l's sign bit is bit 4 l + 3 of the little-endian word qh[2j], qh[2j + 1].
  const int word = w.qh[2 * j] | w.qh[2 * j + 1] << 8;
  const __m256i bit = _mm256_and_si256(
      _mm256_srlv_epi64(_mm256_set1_epi64x(word), _mm256_setr_epi64x(3, 7, 11, 15)),
      _mm256_set1_epi64x(1));
  const __m256i negative = _mm256_cmpeq_epi64(bit, _mm256_set1_epi64x(1));
  return _mm256_or_si256(negative, _mm256_set1_epi8(1));  // 0xff (−1) or 1
}

// Sub-block j's 32 values 8 g + δ (int8, never 0, |·| ≤ 9), in element order: its 4 grid entries
// by 4 scalar loads (the 16 KiB grid stays in L1), g times 8 by a 16-bit shift that drops the
// bits shifted across bytes.
template <typename Block>
inline __m256i iq1_values(const Block& w, int j) {
  const auto entry = [&](int l) {
    return static_cast<long long>(kIq1Grid[static_cast<size_t>(iq1_index(w, j, l))]);
  };
  const __m256i g = _mm256_setr_epi64x(entry(0), entry(1), entry(2), entry(3));
  const __m256i g8 = _mm256_and_si256(_mm256_slli_epi16(g, 3), _mm256_set1_epi8(-8));
  return _mm256_add_epi8(g8, iq1_deltas(w, j));
}

// Sub-block j's scales 2 ls + 1 as vpmaddwd / vpdpwssd pair them: int16 lanes 0-7 (elements
// 0-15) the first half's, 8-15 the second's (IQ1_S: one scale for both).
inline __m256i iq1_scales(const BlockIq1S& w, int j) {
  return _mm256_set1_epi16(static_cast<int16_t>(iq1_scale(w, j, 0)));
}
inline __m256i iq1_scales(const BlockIq1M& w, int j) {
  return _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(iq1_scale(w, j, 0))),
                           _mm_set1_epi16(static_cast<int16_t>(iq1_scale(w, j, 1))));
}

}  // namespace
}  // namespace tern::cpu
