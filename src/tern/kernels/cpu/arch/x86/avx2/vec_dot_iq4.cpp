// AVX2 dot kernels of IQ4_NL, IQ4_XS and MXFP4 rows (see vec_dot_isa.h), bit for bit the scalar
// twins of generic/vec_dot.cpp: the same exact integer sums, then the same float operations in
// the same order. MXFP4 is IQ4_NL with other levels and scale, so it runs IQ4_NL's kernels.
//
// A nibble picks its level (kIq4Levels or kMxfp4Levels, signed, never −128) by vpshufb from a
// 16-byte table.
// vpmaddubsw wants one unsigned side: it takes |level| and the activation negated where the
// level is negative, which cannot overflow since 8-bit activations are never −128
// (quantize_row.h), and a pair of products stays within int16 (2 · 127 · 127).
#include <cstdint>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/arch/x86/superblock_steps.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// The 32 levels of one group of 32 (qs: 16 bytes, element j in the low nibble of qs[j], j + 16
// in the high one), as signed bytes in element order; table: the 16 levels in each 128-bit lane.
inline __m256i group_levels(const uint8_t* qs, __m256i table) {
  const __m128i x = load128(qs);
  const __m256i nibbles =
      _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0F));
  return _mm256_shuffle_epi8(table, nibbles);
}

// A group's levels as the dots take them: |level| and the level (for its sign).
struct Levels {
  __m256i magnitude, sign;
};
inline Levels levels_of(const uint8_t* qs, __m256i table) {
  const __m256i q = group_levels(qs, table);
  return {_mm256_abs_epi8(q), q};
}

// Σ level · a over the group in 16 int16 pair sums (exact).
inline __m256i pair_dots(const Levels& q, const int8_t* a) {
  return _mm256_maddubs_epi16(q.magnitude, _mm256_sign_epi8(load256(a), q.sign));
}

// ---- IQ4_NL and MXFP4: the scalar twin's 16 lanes, lanes 8 (b % 2) .. + 7 vector b % 2 ------

// Block b's integer sums over elements 4m..4m+3, lane m.
inline __m256i block_sums(const Levels& q, const BlockQ8_0& a) {
  return _mm256_madd_epi16(pair_dots(q, a.qs), _mm256_set1_epi16(1));
}

// lanes = fma(block's lane sums, lookup_scale(w) · f16(a.d), lanes).
inline __m256 block_step(__m256 lanes, const Levels& q, float wd, const BlockQ8_0& a) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_sums(q, a)), _mm256_set1_ps(wd * f16(a.d)),
                         lanes);
}

// The scalar twin's tree: lane j + lane j + 8 (the two vectors), then + 4, + 2, + 1.
inline float lanes_sum(const __m256* lanes) { return hsum(_mm256_add_ps(lanes[0], lanes[1])); }

template <typename Block>
float dot_lookup(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const Block*>(w_row);
  const auto* a = static_cast<const BlockQ8_0*>(a_row);
  const int64_t nb = k / kQK;
  const __m256i table = level_table256(lookup_levels(w));
  __m256 lanes[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  // Blocks in pairs, so that each vector of lanes stays in a register.
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    if (b % 8 == 0) prefetch_ahead(w + b, 8 * sizeof(Block));
    lanes[0] = block_step(lanes[0], levels_of(w[b].qs, table), lookup_scale(w[b]), a[b]);
    lanes[1] =
        block_step(lanes[1], levels_of(w[b + 1].qs, table), lookup_scale(w[b + 1]), a[b + 1]);
  }
  if (b < nb) lanes[0] = block_step(lanes[0], levels_of(w[b].qs, table), lookup_scale(w[b]), a[b]);
  return lanes_sum(lanes);
}

// The tile's micro-kernel: 1 row × 4 tokens; each weight block is decoded once for the 4.
template <typename Block>
void micro_lookup(const Block* w, const BlockQ8_0* const* a, int64_t nb, float* out) {
  const __m256i table = level_table256(lookup_levels(w));
  __m256 lanes[kMicroTokens][2];
  for (auto& l : lanes) l[0] = l[1] = _mm256_setzero_ps();
  // Blocks in pairs, so that the vectors of lanes stay in registers.
  for (int64_t b = 0; b < nb; b += 2) {
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      if (b + half == nb) break;  // an odd count: its last block has no pair
      const Levels q = levels_of(w[b + half].qs, table);
      const float wd = lookup_scale(w[b + half]);
#pragma GCC unroll 4
      for (int c = 0; c < kMicroTokens; ++c)
        lanes[c][half] = block_step(lanes[c][half], q, wd, a[c][b + half]);
    }
  }
  for (int c = 0; c < kMicroTokens; ++c) out[c] = lanes_sum(lanes[c]);
}

// ---- IQ4_XS: superblock_steps.h's kernels over these integer dots ---------------------------

// sumi[c] = Σ_j (ls_j − 32) · Σ level · a_c over super-block i, in 8 int32 lanes.
template <int C>
inline void iq4_xs_dots(const BlockIq4Xs& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
  const __m256i scales = iq4_xs_scale_pairs(w), table = level_table256(kIq4Levels);
  for (int c = 0; c < C; ++c) sumi[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const Levels q = levels_of(w.qs + 16 * j, table);
    const __m256i scale = _mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(j));
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c)
      sumi[c] =
          _mm256_add_epi32(sumi[c], _mm256_madd_epi16(pair_dots(q, a[c][i].qs + kQK * j), scale));
  }
}

// The Dots of superblock_steps.h's IQ4_XS kernels.
struct Dots {
  template <int C>
  static void iq4(const BlockIq4Xs& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
    iq4_xs_dots<C>(w, a, i, sumi);
  }
};

}  // namespace

VecDotFn avx2_vec_dot_iq4(DType weight) {
  switch (weight) {
    case DType::IQ4_NL:
      return dot_lookup<BlockIq4Nl>;
    case DType::IQ4_XS:
      return dot_iq4_xs<Dots>;
    case DType::MXFP4:
      return dot_lookup<BlockMxfp4>;
    default:
      return nullptr;
  }
}

GemmTileFn avx2_gemm_tile_iq4(DType weight) {
  switch (weight) {
    case DType::IQ4_NL:
      return four_token_gemm_tile<BlockIq4Nl, BlockQ8_0, kQK, micro_lookup<BlockIq4Nl>>;
    case DType::IQ4_XS:
      return superblock_gemm_tile<BlockIq4Xs, micro_iq4_xs<Dots>>;
    case DType::MXFP4:
      return four_token_gemm_tile<BlockMxfp4, BlockQ8_0, kQK, micro_lookup<BlockMxfp4>>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
