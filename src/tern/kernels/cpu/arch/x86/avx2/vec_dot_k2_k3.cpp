// AVX2 dot kernels of Q2_K and Q3_K rows against Q8_K activation rows (see vec_dot_isa.h),
// bit for bit the scalar twins of generic/vec_dot.cpp.
//
// The scalar twin meets the floats once per super-block: an exact int32 sum of the super-block,
// then `sum += (a.d · d) · sumi − (a.d · dmin) · summ`. These kernels compute the same int32 sums
// in vectors (any order gives the same integer), reduce them to one lane per super-block, and do
// the same float operations in the same order, so every level that inherits them, and every
// token count of the tile, gives the scalar twin's bits.
//
// Both types keep 2 low bits per element in qs: in half h of the super-block (128 elements), bits
// 2g..2g+1 of qs[32h + l] are element 128h + 32g + l. So the 32 bytes of a half shifted right by
// 2g and masked are the 32 elements of chunk (h, g), and its low 128-bit lane holds sub-block
// 8h + 2g, its high lane sub-block 8h + 2g + 1.
//
// int16 bounds of `maddubs` (never saturates): q ≤ 7 (Q3_K as stored), |a| ≤ 127 → 2·7·127.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01));
  return _mm_cvtsi128_si32(s);
}

// Chunk c (< 4) of a half takes int16 scale 2c over its low lane and 2c + 1 over its high lane;
// sc_half holds the half's 8 scales in both lanes.
inline __m256i chunk_scales(__m256i sc_half, int c) {
  const auto lo = static_cast<char>(4 * c), hi = static_cast<char>(4 * c + 2);
  return _mm256_shuffle_epi8(
      sc_half, _mm256_setr_epi8(lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo,
                                lo + 1, lo, lo + 1, lo, lo + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1,
                                hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1));
}

// The 16 int16 sub-block scales sc16 as two halves of 8, each in both lanes.
struct HalfScales {
  __m256i half[2];
  explicit HalfScales(__m256i sc16)
      : half{_mm256_permute2x128_si256(sc16, sc16, 0x00),
             _mm256_permute2x128_si256(sc16, sc16, 0x11)} {}
};

// One super-block's quants, unsigned, as 8 chunks of 32 (chunk 4h + g is (h, g) above).
struct Q2Chunks {
  __m256i q[8];
};

inline void unpack_q2(const BlockQ2_K& w, Q2Chunks* out) {
  const __m256i low2 = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i bits = load256(w.qs + 32 * h);
    out->q[4 * h + 0] = _mm256_and_si256(bits, low2);
    out->q[4 * h + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 2), low2);
    out->q[4 * h + 2] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low2);
    out->q[4 * h + 3] = _mm256_and_si256(_mm256_srli_epi16(bits, 6), low2);
  }
}

// Q3_K as stored: q + 4 in 0..7, the third bit (bit 4h + g of hmask[l]) set for q ≥ 0.
inline void unpack_q3(const BlockQ3_K& w, Q2Chunks* out) {
  const __m256i low2 = _mm256_set1_epi8(3), bit2 = _mm256_set1_epi8(4);
  const __m256i hmask = load256(w.hmask);
  for (int h = 0; h < 2; ++h) {
    const __m256i bits = load256(w.qs + 32 * h);
    for (int g = 0; g < 4; ++g) {
      const __m256i q2 = _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * g)), low2);
      // Bit 4h + g of each hmask byte to bit 2: a 16-bit shift, whose carry from the neighbour
      // byte lands in masked-off bits.
      const int shift = 4 * h + g - 2;
      const __m256i hb = shift >= 0 ? _mm256_srl_epi16(hmask, _mm_cvtsi32_si128(shift))
                                    : _mm256_sll_epi16(hmask, _mm_cvtsi32_si128(-shift));
      out->q[4 * h + g] = _mm256_or_si256(q2, _mm256_and_si256(hb, bit2));
    }
  }
}

// Q3_K's 16 scales, 6 bits each biased by 32, from the 12 packed bytes: byte j (< 8) holds the
// low nibbles of sub-blocks j and j + 8; the top 2 bits of sub-block j are bits 2 (j / 4) of
// byte 8 + j % 4. As 4 words of 4 scales: word n takes its low nibbles from word n % 2 (shifted
// by 4 for n ≥ 2) and its top bits from word 2 shifted by 2n.
inline __m256i unpack_q3_scales(const uint8_t* packed) {
  uint32_t in[3], out[4];
  std::memcpy(in, packed, 12);
  for (int n = 0; n < 4; ++n)
    out[n] = ((in[n % 2] >> (n < 2 ? 0 : 4)) & 0x0f0f0f0fu) | ((in[2] >> (2 * n)) & 0x03030303u) << 4;
  __m128i s;
  std::memcpy(&s, out, 16);
  return _mm256_sub_epi16(_mm256_cvtepu8_epi16(s), _mm256_set1_epi16(32));
}

// Σ_j sc_j · Σ_l q[16j + l] · a[16j + l] over the super-block, in 8 int32 lanes.
inline __m256i scaled_dot(const Q2Chunks& q, const HalfScales& sc, const int8_t* a) {
  __m256i sumi = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < 4; ++g) {
      const __m256i p = _mm256_maddubs_epi16(q.q[4 * h + g], load256(a + 128 * h + 32 * g));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, chunk_scales(sc.half[h], g)));
    }
  return sumi;
}

// One super-block of Q2_K against one activation block, as the scalar twin adds it to `sum`.
inline float q2_k_step(float sum, const BlockQ2_K& w, const Q2Chunks& q, const HalfScales& sc,
                       __m256i mins16, const BlockQ8_K& a) {
  const int sumi = hsum_epi32(scaled_dot(q, sc, a.qs));
  const int summ = hsum_epi32(_mm256_madd_epi16(load256(a.bsums), mins16));
  return sum + ((a.d * f16(w.d)) * static_cast<float>(sumi) -
                (a.d * f16(w.dmin)) * static_cast<float>(summ));
}

// Q3_K as stored is q + 4: Σ sc · q · a = Σ sc · (stored · a) − 4 Σ sc · bsum.
inline float q3_k_step(float sum, const BlockQ3_K& w, const Q2Chunks& q, const HalfScales& sc,
                       __m256i sc16, const BlockQ8_K& a) {
  const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(load256(a.bsums), sc16), 2);
  const int sumi = hsum_epi32(_mm256_sub_epi32(scaled_dot(q, sc, a.qs), offset));
  return sum + (a.d * f16(w.d)) * static_cast<float>(sumi);
}

inline __m256i q2_scales(const BlockQ2_K& w) {
  return _mm256_cvtepu8_epi16(_mm_and_si128(load128(w.scales), _mm_set1_epi8(0x0f)));
}
inline __m256i q2_mins(const BlockQ2_K& w) {
  return _mm256_cvtepu8_epi16(
      _mm_and_si128(_mm_srli_epi16(load128(w.scales), 4), _mm_set1_epi8(0x0f)));
}

float dot_q2_k(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockQ2_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  float sum = 0.0f;
  Q2Chunks q;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    prefetch_ahead(w + i, sizeof(w[i]));
    unpack_q2(w[i], &q);
    sum = q2_k_step(sum, w[i], q, HalfScales(q2_scales(w[i])), q2_mins(w[i]), a[i]);
  }
  return sum;
}

float dot_q3_k(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockQ3_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  float sum = 0.0f;
  Q2Chunks q;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    prefetch_ahead(w + i, sizeof(w[i]));
    unpack_q3(w[i], &q);
    const __m256i sc16 = unpack_q3_scales(w[i].scales);
    sum = q3_k_step(sum, w[i], q, HalfScales(sc16), sc16, a[i]);
  }
  return sum;
}

// ---- GEMM tiles ------------------------------------------------------------------------------
//
// One row × 4 tokens per micro-kernel: a super-block's quants and scales are unpacked once for
// the 4 tokens, their 4 int32 sums reduced together (one transposing reduction instead of 4),
// and the 4 sums advanced by the scalar twin's float operations, lane by lane in one SSE vector:
// the same IEEE operations on the same values, so each lane is dot_q*_k's bits. A ragged edge of
// fewer tokens repeats the last one and drops its lanes.
constexpr int kMicroTokens = 4;

// The lane sums of v[0..3], as 4 int32 lanes.
inline __m128i hsum4_epi32(const __m256i* v) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

struct TokenRows {
  const BlockQ8_K* a[kMicroTokens];
  __m128 d_of(int64_t i) const { return _mm_setr_ps(a[0][i].d, a[1][i].d, a[2][i].d, a[3][i].d); }
};

void gemm_micro_q2_k(const BlockQ2_K* w, const TokenRows& t, int64_t nb, float* out) {
  __m128 sum = _mm_setzero_ps();
  Q2Chunks q;
  for (int64_t i = 0; i < nb; ++i) {
    unpack_q2(w[i], &q);
    const HalfScales sc(q2_scales(w[i]));
    const __m256i mins16 = q2_mins(w[i]);
    __m256i sumi[kMicroTokens], summ[kMicroTokens];
    for (int c = 0; c < kMicroTokens; ++c) {
      sumi[c] = scaled_dot(q, sc, t.a[c][i].qs);
      summ[c] = _mm256_madd_epi16(load256(t.a[c][i].bsums), mins16);
    }
    const __m128 ad = t.d_of(i);
    const __m128 x = _mm_mul_ps(_mm_mul_ps(ad, _mm_set1_ps(f16(w[i].d))),
                                _mm_cvtepi32_ps(hsum4_epi32(sumi)));
    const __m128 y = _mm_mul_ps(_mm_mul_ps(ad, _mm_set1_ps(f16(w[i].dmin))),
                                _mm_cvtepi32_ps(hsum4_epi32(summ)));
    sum = _mm_add_ps(sum, _mm_sub_ps(x, y));
  }
  _mm_storeu_ps(out, sum);
}

void gemm_micro_q3_k(const BlockQ3_K* w, const TokenRows& t, int64_t nb, float* out) {
  __m128 sum = _mm_setzero_ps();
  Q2Chunks q;
  for (int64_t i = 0; i < nb; ++i) {
    unpack_q3(w[i], &q);
    const __m256i sc16 = unpack_q3_scales(w[i].scales);
    const HalfScales sc(sc16);
    __m256i sumi[kMicroTokens];
    for (int c = 0; c < kMicroTokens; ++c) {
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(load256(t.a[c][i].bsums), sc16), 2);
      sumi[c] = _mm256_sub_epi32(scaled_dot(q, sc, t.a[c][i].qs), offset);
    }
    const __m128 x = _mm_mul_ps(_mm_mul_ps(t.d_of(i), _mm_set1_ps(f16(w[i].d))),
                                _mm_cvtepi32_ps(hsum4_epi32(sumi)));
    sum = _mm_add_ps(sum, x);
  }
  _mm_storeu_ps(out, sum);
}

template <typename Block>
void gemm_tile(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data,
               size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQKK;
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  // Tokens outer: a few activation rows stay in L1 while the tile's weight rows stream past.
  for (int64_t c0 = 0; c0 < tokens; c0 += kMicroTokens) {
    const int cc = static_cast<int>(std::min<int64_t>(kMicroTokens, tokens - c0));
    TokenRows t;
    for (int c = 0; c < kMicroTokens; ++c)
      t.a[c] = reinterpret_cast<const BlockQ8_K*>(abytes + (c0 + std::min(c, cc - 1)) * a_stride);
    for (int64_t r = 0; r < rows; ++r) {
      float out[kMicroTokens];
      const auto* wr = reinterpret_cast<const Block*>(wbytes + r * w_stride);
      if constexpr (std::is_same_v<Block, BlockQ2_K>)
        gemm_micro_q2_k(wr, t, nb, out);
      else
        gemm_micro_q3_k(wr, t, nb, out);
      for (int c = 0; c < cc; ++c) y[(c0 + c) * ldy + r] = out[c];
    }
  }
}

}  // namespace

VecDotFn avx2_vec_dot_k2_k3(DType weight) {
  switch (weight) {
    case DType::Q2_K:
      return dot_q2_k;
    case DType::Q3_K:
      return dot_q3_k;
    default:
      return nullptr;
  }
}

GemmTileFn avx2_gemm_tile_k2_k3(DType weight) {
  switch (weight) {
    case DType::Q2_K:
      return gemm_tile<BlockQ2_K>;
    case DType::Q3_K:
      return gemm_tile<BlockQ3_K>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
