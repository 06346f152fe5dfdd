// AVX-512 (BW + VNNI) dot kernels of the "k" family of weight types (see vec_dot_isa.h):
// Q4_K, Q5_K and Q6_K rows against Q8_K activation rows.
//
// One super-block per iteration, 64 elements per 512-bit register. `maddubs` gives int16
// pairs q·a and VNNI's `dpwssd` multiplies them by the sub-block scale and accumulates in
// int32 in one instruction. (VNNI's `dpbusd` would sum four q·a into int32 directly, but then
// the per-sub-block scale needs a 32-bit `vpmulld`, two uops on the same port, per register;
// scaling the int16 pairs is cheaper.) The integer sum of a super-block is exact; it meets
// the float scale once per super-block and the row is reduced horizontally once at the end.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tern/core/half.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/quants/quant_blocks.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// int16 index vector: lanes 0-15 = lo, lanes 16-31 = hi (the scale of each 256-bit half).
inline __m512i halves16(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(lo)),
                            _mm256_set1_epi16(static_cast<int16_t>(hi)), 1);
}

// `pshufb` control for one int16 lane: byte `b` zero-extended.
constexpr int16_t zx(int b) { return static_cast<int16_t>(0x8000 | b); }

// Q4_K and Q5_K differ only in the fifth bit; kHighBit selects Q5_K's.
template <bool kHighBit, typename Block>
float dot_q45_k(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const Block*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  const int64_t nb = k / kQKK;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i sixteen = _mm512_set1_epi8(0x10);
  // A 32-byte chunk of qs is broadcast to both halves of a register; the low half takes the
  // low nibbles (sub-block 2j), the high half the high nibbles (sub-block 2j+1), matching 64
  // contiguous activations.
  const __m512i nibble_shift = halves16(0, 4);
  // The unpacked scales and mins (bytes 0-7, 8-15) sit in every 128-bit lane, and `pshufb`
  // zero-extends the ones a register needs to int16 (a control byte with the top bit set
  // gives 0): per chunk j, scale 2j over the low half and 2j+1 over the high half; for the
  // bsums, [m0, m0, m1, m1, …, m7, m7], one min per pair of 16-element bsums.
  const __m256i mins_dup =
      _mm256_setr_epi16(zx(8), zx(8), zx(9), zx(9), zx(10), zx(10), zx(11), zx(11),  //
                        zx(12), zx(12), zx(13), zx(13), zx(14), zx(14), zx(15), zx(15));
  __m512 acc = _mm512_setzero_ps();    // Σ d · (sc·q·a)
  __m256 acc_m = _mm256_setzero_ps();  // Σ dmin · (m·bsum)
  for (int64_t i = 0; i < nb; ++i) {
    prefetch_ahead(w + i, sizeof(w[i]));
    const float d = f16_to_f32(w[i].d) * a[i].d;
    const float dmin = f16_to_f32(w[i].dmin) * a[i].d;
    const __m512i sc_m = _mm512_broadcast_i32x4(unpack_scales_mins(w[i].scales));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].bsums));
    const __m256i mins =
        _mm256_madd_epi16(bsums, _mm256_shuffle_epi8(_mm512_castsi512_si256(sc_m), mins_dup));
    acc_m = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(mins), acc_m);
    const uint8_t* q = w[i].qs;
    const int8_t* y = a[i].qs;
    __m512i qh;
    if constexpr (kHighBit) {
      qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh)));
    }
    __m512i sumi = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      const __m512i bits =
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * j)));
      __m512i qv = _mm512_and_si512(_mm512_srlv_epi16(bits, nibble_shift), low4);
      if constexpr (kHighBit) {
        // Bit s of qh[l] is the fifth bit of element l of sub-block s.
        const __mmask64 high = _mm512_test_epi8_mask(
            qh, _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * j))),
                                   _mm256_set1_epi8(static_cast<char>(1 << (2 * j + 1))), 1));
        qv = _mm512_mask_add_epi8(qv, high, qv, sixteen);
      }
      const __m512i p = _mm512_maddubs_epi16(qv, _mm512_loadu_si512(y + 64 * j));
      sumi = _mm512_dpwssd_epi32(sumi, p,
                                 _mm512_shuffle_epi8(sc_m, halves16(zx(2 * j), zx(2 * j + 1))));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return _mm512_reduce_add_ps(acc) - _mm512_reduce_add_ps(_mm512_zextps256_ps512(acc_m));
}

// Q6_K: quants stay unsigned (0..63) for `maddubs`; the −32 offset is −32·Σ sc·bsum, taken
// from the activation's bsums and folded into the same int32 sum by one more `dpwssd`.
float dot_q6_k(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const BlockQ6_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  const int64_t nb = k / kQKK;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  // Per 128 elements, qh[l] holds the top bits of elements l, l+32, l+64, l+96 in bit pairs
  // 0-1, 2-3, 4-5, 6-7. Register A (elements 0-63) takes pairs 0-1 / 2-3 in its low / high
  // half, shifted up to bits 4-5; register B (elements 64-127) pairs 4-5 / 6-7.
  const __m512i shift_a = halves16(4, 2);
  const __m512i shift_b = halves16(0, 2);
  // Each 128-bit lane of a `maddubs` result is 16 elements, one scale: int16 index vectors
  // spreading scales 4r..4r+3 over the four lanes.
  __m512i scale_idx[4];
  for (int r = 0; r < 4; ++r) {
    scale_idx[r] = _mm512_inserti64x4(
        _mm512_castsi256_si512(
            _mm256_inserti128_si256(_mm256_set1_epi16(static_cast<int16_t>(4 * r)),
                                    _mm_set1_epi16(static_cast<int16_t>(4 * r + 1)), 1)),
        _mm256_inserti128_si256(_mm256_set1_epi16(static_cast<int16_t>(4 * r + 2)),
                                _mm_set1_epi16(static_cast<int16_t>(4 * r + 3)), 1),
        1);
  }
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    prefetch_ahead(w + i, sizeof(w[i]));
    const float d = f16_to_f32(w[i].d) * a[i].d;
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales)));
    const __m512i sc = _mm512_zextsi256_si512(sc16);
    // −32·sc fits int16 (|sc| ≤ 128 → ≤ 4096).
    const __m512i neg32_sc = _mm512_zextsi256_si512(
        _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5)));
    const __m512i bsums =
        _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].bsums)));
    __m512i sumi = _mm512_dpwssd_epi32(_mm512_setzero_si512(), bsums, neg32_sc);
    for (int half = 0; half < 2; ++half) {
      const __m512i ql = _mm512_loadu_si512(w[i].ql + 64 * half);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh + 32 * half)));
      const __m512i qa = _mm512_or_si512(_mm512_and_si512(ql, low4),
                                         _mm512_and_si512(_mm512_sllv_epi16(qh, shift_a), bits45));
      const __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                         _mm512_and_si512(_mm512_srlv_epi16(qh, shift_b), bits45));
      const int8_t* y = a[i].qs + 128 * half;
      const __m512i pa = _mm512_maddubs_epi16(qa, _mm512_loadu_si512(y));
      const __m512i pb = _mm512_maddubs_epi16(qb, _mm512_loadu_si512(y + 64));
      sumi = _mm512_dpwssd_epi32(sumi, pa, _mm512_permutexvar_epi16(scale_idx[2 * half], sc));
      sumi = _mm512_dpwssd_epi32(sumi, pb, _mm512_permutexvar_epi16(scale_idx[2 * half + 1], sc));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// ---- GEMM tiles ------------------------------------------------------------------------------
//
// kMicroRows weight rows x kMicroTokens tokens per micro-kernel (2 x 4 measured fastest of
// 1 x 4 .. 4 x 1; larger ones spill), each element with its dot's arithmetic: the same exact
// int32 lanes per super-block, the same float scales (d and dmin are the same products,
// broadcast), the same accumulators and final sums. A super-block's quants, scales and mins
// are unpacked once for all the tokens.
constexpr int kMicroRows = 2, kMicroTokens = 4;

template <bool kHighBit, typename Block, int R, int C>
void gemm_micro_q45_k(const Block* const* w, const BlockQ8_K* const* a, int64_t nb, float* y,
                      size_t ldy) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i sixteen = _mm512_set1_epi8(0x10);
  const __m512i nibble_shift = halves16(0, 4);
  const __m256i mins_dup =
      _mm256_setr_epi16(zx(8), zx(8), zx(9), zx(9), zx(10), zx(10), zx(11), zx(11),  //
                        zx(12), zx(12), zx(13), zx(13), zx(14), zx(14), zx(15), zx(15));
  __m512 acc[R][C];
  __m256 acc_m[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      acc[r][c] = _mm512_setzero_ps();
      acc_m[r][c] = _mm256_setzero_ps();
    }
  }
  for (int64_t i = 0; i < nb; ++i) {
    __m512i sc_m[R];
    for (int r = 0; r < R; ++r)
      sc_m[r] = _mm512_broadcast_i32x4(unpack_scales_mins(w[r][i].scales));
      // Σ dmin · (m·bsum)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][i].bsums));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i mins = _mm256_madd_epi16(
            bsums, _mm256_shuffle_epi8(_mm512_castsi512_si256(sc_m[r]), mins_dup));
        const __m256 dmin =
            _mm256_mul_ps(_mm256_set1_ps(f16_to_f32(w[r][i].dmin)), _mm256_set1_ps(a[c][i].d));
        acc_m[r][c] = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(mins), acc_m[r][c]);
      }
    }
    // Σ d · (sc·q·a)
    __m512i sumi[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) sumi[r][c] = _mm512_setzero_si512();
    __m512i qh[R];
    if constexpr (kHighBit) {
      for (int r = 0; r < R; ++r)
        qh[r] = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][i].qh)));
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __m512i qv[R], scale[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i bits = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][i].qs + 32 * j)));
        qv[r] = _mm512_and_si512(_mm512_srlv_epi16(bits, nibble_shift), low4);
        if constexpr (kHighBit) {
          const __mmask64 high = _mm512_test_epi8_mask(
              qh[r], _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * j))),
                                        _mm256_set1_epi8(static_cast<char>(1 << (2 * j + 1))), 1));
          qv[r] = _mm512_mask_add_epi8(qv[r], high, qv[r], sixteen);
        }
        scale[r] = _mm512_shuffle_epi8(sc_m[r], halves16(zx(2 * j), zx(2 * j + 1)));
      }
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const __m512i yv = _mm512_loadu_si512(a[c][i].qs + 64 * j);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
          sumi[r][c] = _mm512_dpwssd_epi32(sumi[r][c], _mm512_maddubs_epi16(qv[r], yv), scale[r]);
      }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512 d =
            _mm512_mul_ps(_mm512_set1_ps(f16_to_f32(w[r][i].d)), _mm512_set1_ps(a[c][i].d));
        acc[r][c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi[r][c]), acc[r][c]);
      }
    }
  }
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r)
      y[c * ldy + r] = _mm512_reduce_add_ps(acc[r][c]) -
                       _mm512_reduce_add_ps(_mm512_zextps256_ps512(acc_m[r][c]));
}

// Q6_K, as dot_q6_k: the same int32 lanes (the −32 offset from the bsums first), the same d.
template <int R, int C>
void gemm_micro_q6_k(const BlockQ6_K* const* w, const BlockQ8_K* const* a, int64_t nb, float* y,
                     size_t ldy) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  const __m512i shift_a = halves16(4, 2);
  const __m512i shift_b = halves16(0, 2);
  __m512i scale_idx[4];
  for (int q = 0; q < 4; ++q) {
    scale_idx[q] = _mm512_inserti64x4(
        _mm512_castsi256_si512(
            _mm256_inserti128_si256(_mm256_set1_epi16(static_cast<int16_t>(4 * q)),
                                    _mm_set1_epi16(static_cast<int16_t>(4 * q + 1)), 1)),
        _mm256_inserti128_si256(_mm256_set1_epi16(static_cast<int16_t>(4 * q + 2)),
                                _mm_set1_epi16(static_cast<int16_t>(4 * q + 3)), 1),
        1);
  }
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m512i sc[R], sumi[R][C];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i sc16 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[r][i].scales)));
      sc[r] = _mm512_zextsi256_si512(sc16);
      const __m512i neg32_sc = _mm512_zextsi256_si512(
          _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5)));
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const __m512i bsums = _mm512_zextsi256_si512(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][i].bsums)));
        sumi[r][c] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), bsums, neg32_sc);
      }
    }
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      __m512i qa[R], qb[R], sa[R], sb[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i ql = _mm512_loadu_si512(w[r][i].ql + 64 * half);
        const __m512i qh = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][i].qh + 32 * half)));
        qa[r] = _mm512_or_si512(_mm512_and_si512(ql, low4),
                                _mm512_and_si512(_mm512_sllv_epi16(qh, shift_a), bits45));
        qb[r] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                _mm512_and_si512(_mm512_srlv_epi16(qh, shift_b), bits45));
        sa[r] = _mm512_permutexvar_epi16(scale_idx[2 * half], sc[r]);
        sb[r] = _mm512_permutexvar_epi16(scale_idx[2 * half + 1], sc[r]);
      }
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const int8_t* yq = a[c][i].qs + 128 * half;
        const __m512i ya = _mm512_loadu_si512(yq), yb = _mm512_loadu_si512(yq + 64);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          sumi[r][c] = _mm512_dpwssd_epi32(sumi[r][c], _mm512_maddubs_epi16(qa[r], ya), sa[r]);
          sumi[r][c] = _mm512_dpwssd_epi32(sumi[r][c], _mm512_maddubs_epi16(qb[r], yb), sb[r]);
        }
      }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512 d =
            _mm512_mul_ps(_mm512_set1_ps(f16_to_f32(w[r][i].d)), _mm512_set1_ps(a[c][i].d));
        acc[r][c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi[r][c]), acc[r][c]);
      }
    }
  }
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) y[c * ldy + r] = _mm512_reduce_add_ps(acc[r][c]);
}

// The micro-kernels of one block type, for every R <= kMicroRows and C <= kMicroTokens (the
// ragged edges of a tile too).
template <typename Block>
struct Micro {
  using Fn = void (*)(const Block* const*, const BlockQ8_K* const*, int64_t, float*, size_t);
  template <int R, int C>
  static constexpr Fn kernel() {
    if constexpr (std::is_same_v<Block, BlockQ4_K>)
      return gemm_micro_q45_k<false, Block, R, C>;
    else if constexpr (std::is_same_v<Block, BlockQ5_K>)
      return gemm_micro_q45_k<true, Block, R, C>;
    else
      return gemm_micro_q6_k<R, C>;
  }
  template <int R, size_t... Cs>
  static constexpr std::array<Fn, sizeof...(Cs)> row(std::index_sequence<Cs...>) {
    return {kernel<R, static_cast<int>(Cs) + 1>()...};
  }
  template <size_t... Rs>
  static constexpr auto table(std::index_sequence<Rs...>) {
    return std::array<std::array<Fn, kMicroTokens>, sizeof...(Rs)>{
        row<static_cast<int>(Rs) + 1>(std::make_index_sequence<kMicroTokens>())...};
  }
  // [R - 1][C - 1]
  static constexpr auto kTable = table(std::make_index_sequence<kMicroRows>());
};

template <typename Block>
void gemm_tile(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data,
               size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQKK;
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  // Tokens outer: a few activation rows stay in L1 while the tile's weight rows stream past.
  for (int64_t c0 = 0; c0 < tokens; c0 += kMicroTokens) {
    const int cc = static_cast<int>(std::min<int64_t>(kMicroTokens, tokens - c0));
    const BlockQ8_K* a[kMicroTokens];
    for (int c = 0; c < cc; ++c)
      a[c] = reinterpret_cast<const BlockQ8_K*>(abytes + (c0 + c) * a_stride);
    for (int64_t r0 = 0; r0 < rows; r0 += kMicroRows) {
      const int rr = static_cast<int>(std::min<int64_t>(kMicroRows, rows - r0));
      const Block* w[kMicroRows];
      for (int r = 0; r < rr; ++r)
        w[r] = reinterpret_cast<const Block*>(wbytes + (r0 + r) * w_stride);
      Micro<Block>::kTable[rr - 1][cc - 1](w, a, nb, y + c0 * ldy + r0, ldy);
    }
  }
}

}  // namespace

VecDotFn avx512_vec_dot_k(DType weight) {
  switch (weight) {
    case DType::Q4_K:
      return dot_q45_k<false, BlockQ4_K>;
    case DType::Q5_K:
      return dot_q45_k<true, BlockQ5_K>;
    case DType::Q6_K:
      return dot_q6_k;
    default:
      return nullptr;
  }
}

GemmTileFn avx512_gemm_tile_k(DType weight) {
  switch (weight) {
    case DType::Q4_K:
      return gemm_tile<BlockQ4_K>;
    case DType::Q5_K:
      return gemm_tile<BlockQ5_K>;
    case DType::Q6_K:
      return gemm_tile<BlockQ6_K>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
