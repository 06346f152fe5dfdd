// Pieces of the 16-chain block-exact arithmetic that the AVX-512 (VNNI) and AMX levels share
// (avx512/ and amx/): the per-block integer sums gathered into the lanes of one register, and
// the fixed tree that sums the 16 float chains. Internal linkage, so each file compiles its own
// copy.
#pragma once

#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"

namespace tern::cpu {
namespace {

// Float chains per output element = lanes of a register = rows and tokens of a tile.
constexpr int kChains = 16;

// The exact sums of 16 consecutive blocks, lane j = block j, from 8 registers of which
// register p holds 8 int32 partial sums of block 2p in lanes 0-7 and of block 2p + 1 in
// lanes 8-15.
inline __m512i block_sums16(const __m512i d[8]) {
  // Each step adds lanes pairwise and interleaves two registers, so after three steps every
  // block's 8 lanes are one; integer sums, so the order is free.
  __m512i e[4], f[2];
  for (int i = 0; i < 4; ++i)
    e[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(d[2 * i], d[2 * i + 1]),
                            _mm512_unpackhi_epi32(d[2 * i], d[2 * i + 1]));
  for (int i = 0; i < 2; ++i)
    f[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(e[2 * i], e[2 * i + 1]),
                            _mm512_unpackhi_epi64(e[2 * i], e[2 * i + 1]));
  // 128-bit lane q of f[0] holds pairs 0-3's sums of their lane q: blocks 2p (q = 0, 1) and
  // 2p + 1 (q = 2, 3).
  const __m512i g = _mm512_add_epi32(_mm512_shuffle_i32x4(f[0], f[1], 0x88),
                                     _mm512_shuffle_i32x4(f[0], f[1], 0xDD));
  // g's lanes are blocks 0 2 4 6 1 3 5 7 8 10 12 14 9 11 13 15.
  return _mm512_permutexvar_epi32(
      _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15), g);
}

// The fixed tree over the 16 chains: j + (j + 8), then + 4, + 2, + 1.
inline float sum_chains(__m512 chains) {
  const __m256 s8 =
      _mm256_add_ps(_mm512_castps512_ps256(chains), _mm512_extractf32x8_ps(chains, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// sum_chains lane by lane: c[j] holds chain j of 16 outputs (rows or tokens), and the result's
// lane i is output i's sum, in the same tree. Overwrites c.
inline __m512 sum_chains16(__m512* c) {
  for (int width = kChains / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) c[j] = _mm512_add_ps(c[j], c[j + width]);
  return c[0];
}

}  // namespace
}  // namespace tern::cpu
