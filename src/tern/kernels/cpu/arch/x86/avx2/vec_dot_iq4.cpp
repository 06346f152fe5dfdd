// AVX2 dot kernels of IQ4_NL and IQ4_XS rows (see vec_dot_isa.h), bit for bit the scalar twins
// of generic/vec_dot.cpp: the same exact integer sums, then the same float operations in the
// same order.
//
// A nibble picks its level (kIq4Levels, signed, never −128) by vpshufb from a 16-byte table.
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
// in the high one), as signed bytes in element order.
inline __m256i group_levels(const uint8_t* qs) {
  const __m128i x = load128(qs);
  const __m256i nibbles =
      _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0F));
  return _mm256_shuffle_epi8(iq4_level_table256(), nibbles);
}

// A group's levels as the dots take them: |level| and the level (for its sign).
struct Levels {
  __m256i magnitude, sign;
};
inline Levels levels_of(const uint8_t* qs) {
  const __m256i q = group_levels(qs);
  return {_mm256_abs_epi8(q), q};
}

// Σ level · a over the group in 16 int16 pair sums (exact).
inline __m256i pair_dots(const Levels& q, const int8_t* a) {
  return _mm256_maddubs_epi16(q.magnitude, _mm256_sign_epi8(load256(a), q.sign));
}

// ---- IQ4_NL: 8 chains of blocks (the scalar twin's), lane j of a vector chain j -----------

// Block b's integer sum in 8 int32 partials.
inline __m256i block_sums(const BlockIq4Nl& w, const BlockQ8_0& a) {
  return _mm256_madd_epi16(pair_dots(levels_of(w.qs), a.qs), _mm256_set1_epi16(1));
}

// The lane sums of v[0..7] as lane j of one vector.
inline __m256i hsum8_epi32(const __m256i* v) {
  const __m256i h0 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i h1 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  // h0: v0..v3's low-lane sums | their high-lane sums; h1 likewise for v4..v7.
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20),
                          _mm256_permute2x128_si256(h0, h1, 0x31));
}

// The f16 scales d of 8 consecutive blocks as 8 floats.
template <typename Block>
inline __m256 block_scales8(const Block* b) {
  alignas(16) uint16_t h[8];
  for (int j = 0; j < 8; ++j) h[j] = b[j].d;
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}

// The scalar twin's last steps: blocks past the last whole 8 into their chains one at a time,
// then the chains summed j + j + 4, + 2, + 1.
inline float finish_chains(__m256 chains, const BlockIq4Nl* w, const BlockQ8_0* a, int64_t b,
                           int64_t nb) {
  alignas(32) float c[kIq4NlChains];
  _mm256_store_ps(c, chains);
  for (int j = 0; b < nb; ++b, ++j) {
    const float scale = f16(w[b].d) * f16(a[b].d);
    const auto sumi = static_cast<float>(hsum_epi32(block_sums(w[b], a[b])));
    c[j] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(sumi), _mm_set_ss(scale), _mm_set_ss(c[j])));
  }
  __m128 s = _mm_add_ps(_mm_load_ps(c), _mm_load_ps(c + 4));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float dot_iq4_nl(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockIq4Nl*>(w_row);
  const auto* a = static_cast<const BlockQ8_0*>(a_row);
  const int64_t nb = k / kQK;
  __m256 chains = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + kIq4NlChains <= nb; b += kIq4NlChains) {
    prefetch_ahead(w + b, kIq4NlChains * sizeof(BlockIq4Nl));
    __m256i sums[kIq4NlChains];
#pragma GCC unroll 8
    for (int j = 0; j < kIq4NlChains; ++j) sums[j] = block_sums(w[b + j], a[b + j]);
    const __m256 scale = _mm256_mul_ps(block_scales8(w + b), block_scales8(a + b));
    chains = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hsum8_epi32(sums)), scale, chains);
  }
  return finish_chains(chains, w, a, b, nb);
}

// The tile: 1 row × 4 tokens, each token its own chains; a group of 8 weight blocks is decoded
// once for the 4 tokens.
constexpr int kNlTokens = 4;
void micro_iq4_nl(const BlockIq4Nl* w, const BlockQ8_0* const* a, int64_t nb, float* out) {
  __m256 chains[kNlTokens];
  for (__m256& c : chains) c = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + kIq4NlChains <= nb; b += kIq4NlChains) {
    Levels q[kIq4NlChains];
    for (int j = 0; j < kIq4NlChains; ++j) q[j] = levels_of(w[b + j].qs);
    const __m256 w_scale = block_scales8(w + b);
    for (int c = 0; c < kNlTokens; ++c) {
      __m256i sums[kIq4NlChains];
#pragma GCC unroll 8
      for (int j = 0; j < kIq4NlChains; ++j)
        sums[j] = _mm256_madd_epi16(pair_dots(q[j], a[c][b + j].qs), _mm256_set1_epi16(1));
      const __m256 scale = _mm256_mul_ps(w_scale, block_scales8(a[c] + b));
      chains[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hsum8_epi32(sums)), scale, chains[c]);
    }
  }
  for (int c = 0; c < kNlTokens; ++c) out[c] = finish_chains(chains[c], w, a[c], b, nb);
}

void gemm_tile_iq4_nl(int64_t k, const void* w_data, size_t w_stride, int64_t rows,
                      const void* a_data, size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  for (int64_t c0 = 0; c0 < tokens; c0 += kNlTokens) {
    const int cc = static_cast<int>(std::min<int64_t>(kNlTokens, tokens - c0));
    const BlockQ8_0* a[kNlTokens];
    for (int c = 0; c < kNlTokens; ++c)
      a[c] = reinterpret_cast<const BlockQ8_0*>(abytes + (c0 + std::min(c, cc - 1)) * a_stride);
    for (int64_t r = 0; r < rows; ++r) {
      float out[kNlTokens];
      micro_iq4_nl(reinterpret_cast<const BlockIq4Nl*>(wbytes + r * w_stride), a, k / kQK, out);
      for (int c = 0; c < cc; ++c) y[(c0 + c) * ldy + r] = out[c];
    }
  }
}

// ---- IQ4_XS: superblock_steps.h's kernels over these integer dots ---------------------------

// sumi[c] = Σ_j (ls_j − 32) · Σ level · a_c over super-block i, in 8 int32 lanes.
template <int C>
inline void iq4_xs_dots(const BlockIq4Xs& w, const BlockQ8_K* const* a, int64_t i, __m256i* sumi) {
  const __m256i scales = iq4_xs_scale_pairs(w);
  for (int c = 0; c < C; ++c) sumi[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const Levels q = levels_of(w.qs + 16 * j);
    const __m256i scale = _mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(j));
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c)
      sumi[c] =
          _mm256_add_epi32(sumi[c], _mm256_madd_epi16(pair_dots(q, a[c][i].qs + kQK * j), scale));
  }
}

float dot_iq4_xs(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockIq4Xs*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  return superblock_dot(w, a, k / kQKK, [&](int64_t i, __m256i* dots, __m256i*) {
    prefetch_ahead(w + i, sizeof(w[i]));
    iq4_xs_dots<1>(w[i], &a, i, dots);
  });
}

void micro_iq4_xs(const BlockIq4Xs* w, const BlockQ8_K* const* a, int64_t nb, float* out) {
  __m128 sum = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i dots[kMicroTokens];
    iq4_xs_dots<kMicroTokens>(w[i], a, i, dots);
    sum = symmetric_step4(sum, w[i], token_scales(a, i), hsum4_epi32(dots));
  }
  _mm_storeu_ps(out, sum);
}

}  // namespace

VecDotFn avx2_vec_dot_iq4(DType weight) {
  switch (weight) {
    case DType::IQ4_NL:
      return dot_iq4_nl;
    case DType::IQ4_XS:
      return dot_iq4_xs;
    default:
      return nullptr;
  }
}

GemmTileFn avx2_gemm_tile_iq4(DType weight) {
  switch (weight) {
    case DType::IQ4_NL:
      return gemm_tile_iq4_nl;
    case DType::IQ4_XS:
      return superblock_gemm_tile<BlockIq4Xs, micro_iq4_xs>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
