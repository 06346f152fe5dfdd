// AVX2 dot kernels of the "k" family of weight types (see vec_dot_isa.h): Q4_K, Q5_K and
// Q6_K rows against Q8_K activation rows.
//
// One super-block (256 elements) per iteration: `maddubs` multiplies unsigned quants by
// signed activations into int16 pairs, `madd` with the sub-block's scale broadcast to int16
// folds the scale in and widens to int32, so a super-block's integer sum lives in 8 int32
// lanes and is exact. It meets the float scale once per super-block (one cvt + fmadd) and
// the only horizontal sum is at the end of the row.
//
// int16 bounds of `maddubs` (never saturates): q ≤ 63 (Q6_K), |a| ≤ 128 → 2·63·128 = 16128.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "tern/blocks/block_layouts.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// int16 lane `s` of each 128-bit half of v, broadcast across that half.
inline __m256i broadcast_lane16(__m256i v, int s) {
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<int16_t>((2 * s + 1) << 8 | 2 * s)));
}

// Σ_sub m · (bsum of the sub-block): the pairs of 16-element bsums are one 32-element
// sub-block each; 4 int32 lanes.
inline __m128i mins_dot(const BlockQ8_K& a, __m128i mins16) {
  const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  const __m128i sub_sums =
      _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
  return _mm_madd_epi16(sub_sums, mins16);
}

float dot_q4_k(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockQ4_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  const int64_t nb = k / kQKK;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256 acc = _mm256_setzero_ps();  // Σ d · (sc·q·a)
  __m128 acc_m = _mm_setzero_ps();   // Σ dmin · (m·bsum)
  for (int64_t i = 0; i < nb; ++i) {
    prefetch_ahead(w + i, sizeof(w[i]));
    const float d = f16_to_f32(w[i].d) * a[i].d;
    const float dmin = f16_to_f32(w[i].dmin) * a[i].d;
    // sc_m: int16, low half = 8 scales, high half = 8 mins
    const __m256i sc_m = _mm256_cvtepu8_epi16(unpack_scales_mins(w[i].scales));
    acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin),
                         _mm_cvtepi32_ps(mins_dot(a[i], _mm256_extracti128_si256(sc_m, 1))), acc_m);
    const __m256i sc = _mm256_permute2x128_si256(sc_m, sc_m, 0x00);  // scales in both halves
    const uint8_t* q = w[i].qs;
    const int8_t* y = a[i].qs;
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * j));
      const __m256i q_lo = _mm256_and_si256(bits, low4);
      const __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
      const __m256i p_lo = _mm256_maddubs_epi16(
          q_lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 64 * j)));
      const __m256i p_hi = _mm256_maddubs_epi16(
          q_hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 64 * j + 32)));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p_lo, broadcast_lane16(sc, 2 * j)));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p_hi, broadcast_lane16(sc, 2 * j + 1)));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc) - hsum(acc_m);
}

float dot_q5_k(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockQ5_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  const int64_t nb = k / kQKK;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    prefetch_ahead(w + i, sizeof(w[i]));
    const float d = f16_to_f32(w[i].d) * a[i].d;
    const float dmin = f16_to_f32(w[i].dmin) * a[i].d;
    const __m256i sc_m = _mm256_cvtepu8_epi16(unpack_scales_mins(w[i].scales));
    acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin),
                         _mm_cvtepi32_ps(mins_dot(a[i], _mm256_extracti128_si256(sc_m, 1))), acc_m);
    const __m256i sc = _mm256_permute2x128_si256(sc_m, sc_m, 0x00);
    const uint8_t* q = w[i].qs;
    const int8_t* y = a[i].qs;
    // Bit s of qh[l] is the fifth bit of element l of sub-block s. Shifting the vector right
    // by 2 per chunk brings sub-blocks 2j, 2j+1 to bits 0, 1 of every byte; what the 16-bit
    // shift carries in from the neighbour byte lands in bits that are masked off.
    __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh));
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * j));
      const __m256i q_lo = _mm256_or_si256(_mm256_and_si256(bits, low4),
                                           _mm256_and_si256(_mm256_slli_epi16(qh, 4), bit4));
      const __m256i q_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), low4),
                                           _mm256_and_si256(_mm256_slli_epi16(qh, 3), bit4));
      qh = _mm256_srli_epi16(qh, 2);
      const __m256i p_lo = _mm256_maddubs_epi16(
          q_lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 64 * j)));
      const __m256i p_hi = _mm256_maddubs_epi16(
          q_hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 64 * j + 32)));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p_lo, broadcast_lane16(sc, 2 * j)));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p_hi, broadcast_lane16(sc, 2 * j + 1)));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc) - hsum(acc_m);
}

// Q6_K: quants stay unsigned (0..63) for `maddubs`; the −32 offset is −32·Σ sc·bsum, taken
// from the activation's bsums and subtracted in int32 before the super-block meets d.
float dot_q6_k(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockQ6_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  const int64_t nb = k / kQKK;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    prefetch_ahead(w + i, sizeof(w[i]));
    const float d = f16_to_f32(w[i].d) * a[i].d;
    const __m256i sc =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales)));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].bsums));
    __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(),
                                    _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc), 5));
    for (int half = 0; half < 2; ++half) {
      // 128 elements: ql[0..31] and ql[32..63] give elements 0-31 / 32-63 by their low
      // nibbles and 64-95 / 96-127 by their high ones; qh bit pairs 0-1, 2-3, 4-5, 6-7 of
      // qh[l] are the top bits of elements l, l+32, l+64, l+96.
      const uint8_t* ql = w[i].ql + 64 * half;
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh + 32 * half));
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      __m256i qv[4];
      qv[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                              _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45));
      qv[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                              _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45));
      qv[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                              _mm256_and_si256(qh, bits45));
      qv[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                              _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45));
      // This half's 8 int16 scales in both 128-bit lanes; chunk c (32 elements) takes
      // scale 2c over its low lane and 2c+1 over its high lane.
      const __m256i sc_half = half == 0 ? _mm256_permute2x128_si256(sc, sc, 0x00)
                                        : _mm256_permute2x128_si256(sc, sc, 0x11);
      const int8_t* y = a[i].qs + 128 * half;
      for (int c = 0; c < 4; ++c) {
        const __m256i p = _mm256_maddubs_epi16(
            qv[c], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 32 * c)));
        const __m256i s = _mm256_shuffle_epi8(
            sc_half, _mm256_setr_epi8(
                         4 * c, 4 * c + 1, 4 * c, 4 * c + 1, 4 * c, 4 * c + 1, 4 * c, 4 * c + 1,
                         4 * c, 4 * c + 1, 4 * c, 4 * c + 1, 4 * c, 4 * c + 1, 4 * c, 4 * c + 1,  //
                         4 * c + 2, 4 * c + 3, 4 * c + 2, 4 * c + 3, 4 * c + 2, 4 * c + 3,
                         4 * c + 2, 4 * c + 3, 4 * c + 2, 4 * c + 3, 4 * c + 2, 4 * c + 3,
                         4 * c + 2, 4 * c + 3, 4 * c + 2, 4 * c + 3));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

// ---- GEMM tiles ------------------------------------------------------------------------------
//
// One row x kMicroTokens tokens per micro-kernel (16 ymm registers hold three elements'
// accumulators and one row's unpacked chunk), each element with dot_q4_k's / dot_q5_k's
// arithmetic: the same int32 lanes, d and dmin, accumulators and final sums. A super-block's
// nibbles and scales are unpacked once for all the tokens.
constexpr int kMicroTokens = 3;

template <bool kHighBit, typename Block, int C>
void gemm_micro_q45_k(const Block* w, const BlockQ8_K* const* a, int64_t nb, float* y, size_t ldy) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  __m256 acc[C];
  __m128 acc_m[C];
  for (int c = 0; c < C; ++c) {
    acc[c] = _mm256_setzero_ps();
    acc_m[c] = _mm_setzero_ps();
  }
  for (int64_t i = 0; i < nb; ++i) {
    const float wd = f16_to_f32(w[i].d), wdmin = f16_to_f32(w[i].dmin);
    const __m256i sc_m = _mm256_cvtepu8_epi16(unpack_scales_mins(w[i].scales));
    const __m128i mins16 = _mm256_extracti128_si256(sc_m, 1);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const float dmin = wdmin * a[c][i].d;
      acc_m[c] =
          _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mins_dot(a[c][i], mins16)), acc_m[c]);
    }
    const __m256i sc = _mm256_permute2x128_si256(sc_m, sc_m, 0x00);
    __m256i qh;
    if constexpr (kHighBit) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh));
    __m256i sumi[C];
    for (int c = 0; c < C; ++c) sumi[c] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs + 32 * j));
      __m256i q_lo = _mm256_and_si256(bits, low4);
      __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
      if constexpr (kHighBit) {
        q_lo = _mm256_or_si256(q_lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), bit4));
        q_hi = _mm256_or_si256(q_hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), bit4));
        qh = _mm256_srli_epi16(qh, 2);
      }
      const __m256i s_lo = broadcast_lane16(sc, 2 * j), s_hi = broadcast_lane16(sc, 2 * j + 1);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const int8_t* yq = a[c][i].qs + 64 * j;
        const __m256i p_lo =
            _mm256_maddubs_epi16(q_lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq)));
        const __m256i p_hi = _mm256_maddubs_epi16(
            q_hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq + 32)));
        sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(p_lo, s_lo));
        sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(p_hi, s_hi));
      }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const float d = wd * a[c][i].d;
      acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
    }
  }
  for (int c = 0; c < C; ++c) y[c * ldy] = hsum(acc[c]) - hsum(acc_m[c]);
}

template <bool kHighBit, typename Block>
using MicroQ45K = void (*)(const Block*, const BlockQ8_K* const*, int64_t, float*, size_t);
template <bool kHighBit, typename Block, size_t... Cs>
constexpr std::array<MicroQ45K<kHighBit, Block>, sizeof...(Cs)> micro_table_q45_k(
    std::index_sequence<Cs...>) {
  return {gemm_micro_q45_k<kHighBit, Block, static_cast<int>(Cs) + 1>...};
}
// [C - 1]: the micro-kernel for C tokens (the ragged edge too).
template <bool kHighBit, typename Block>
constexpr auto kMicroQ45K =
    micro_table_q45_k<kHighBit, Block>(std::make_index_sequence<kMicroTokens>());

template <bool kHighBit, typename Block>
void gemm_tile_q45_k(int64_t k, const void* w_data, size_t w_stride, int64_t rows,
                     const void* a_data, size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQKK;
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  // Tokens outer: a few activation rows stay in L1 while the tile's weight rows stream past.
  for (int64_t c0 = 0; c0 < tokens; c0 += kMicroTokens) {
    const int cc = static_cast<int>(std::min<int64_t>(kMicroTokens, tokens - c0));
    const BlockQ8_K* a[kMicroTokens];
    for (int c = 0; c < cc; ++c)
      a[c] = reinterpret_cast<const BlockQ8_K*>(abytes + (c0 + c) * a_stride);
    for (int64_t r = 0; r < rows; ++r)
      kMicroQ45K<kHighBit, Block>[cc - 1](reinterpret_cast<const Block*>(wbytes + r * w_stride), a,
                                          nb, y + c0 * ldy + r, ldy);
  }
}

}  // namespace

VecDotFn avx2_vec_dot_k(DType weight) {
  switch (weight) {
    case DType::Q4_K:
      return dot_q4_k;
    case DType::Q5_K:
      return dot_q5_k;
    case DType::Q6_K:
      return dot_q6_k;
    default:
      return nullptr;
  }
}

GemmTileFn avx2_gemm_tile_k(DType weight) {
  switch (weight) {
    case DType::Q4_K:
      return gemm_tile_q45_k<false, BlockQ4_K>;
    case DType::Q5_K:
      return gemm_tile_q45_k<true, BlockQ5_K>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
