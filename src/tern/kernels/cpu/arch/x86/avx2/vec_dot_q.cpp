// AVX2 dot kernels of the "q" family: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 weight rows against
// Q8_0 / Q8_1 activation rows (see vec_dot_isa.h, layouts in blocks/block_layouts.h).
//
// Every block's integer dot is exact for all inputs, including activations of -128 (the
// usual vpsignb trick is not: it cannot negate -128), and is scaled by d_w * d_a in float.
// The f16 scales of eight blocks are converted together, so the per-block float work is one
// broadcast, one convert and one FMA.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// 32 bytes 0..15 in element order: qs's low nibbles are elements 0..15, its high ones 16..31.
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i x = load128(qs);
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(x, 4), x);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 32 bytes, 0x10 where bit j of the little-endian qh is set, else 0.
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof bits);
  // Byte j takes qh byte j / 8 (vpshufb works per 128-bit lane, and every lane holds all four
  // bytes), then tests bit j % 8.
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                           2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// sum (q - offset) * a over 32 elements, as 8 int32 partial sums. q is 0..31 unsigned, so
// vpmaddubsw cannot saturate (2 * 31 * 128 < 32767) and the offset is a second vpmaddubsw.
template <int kOffset>
inline __m256i dot_u8_s8(__m256i q, __m256i a) {
  __m256i pairs = _mm256_maddubs_epi16(q, a);
  if constexpr (kOffset != 0) {
    pairs = _mm256_sub_epi16(pairs, _mm256_maddubs_epi16(_mm256_set1_epi8(kOffset), a));
  }
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

// The integer dot of one weight block with one activation block, as 8 int32 partial sums.
inline __m256i block_dot(const BlockQ4_0& w, const BlockQ8_0& a) {
  return dot_u8_s8<8>(unpack_nibbles(w.qs), load256(a.qs));
}
inline __m256i block_dot(const BlockQ4_1& w, const BlockQ8_1& a) {
  return dot_u8_s8<0>(unpack_nibbles(w.qs), load256(a.qs));
}
inline __m256i block_dot(const BlockQ5_0& w, const BlockQ8_0& a) {
  const __m256i q = _mm256_or_si256(unpack_nibbles(w.qs), fifth_bits(w.qh));
  return dot_u8_s8<16>(q, load256(a.qs));
}
inline __m256i block_dot(const BlockQ5_1& w, const BlockQ8_1& a) {
  const __m256i q = _mm256_or_si256(unpack_nibbles(w.qs), fifth_bits(w.qh));
  return dot_u8_s8<0>(q, load256(a.qs));
}
// int8 * int8 can reach 2 * 128 * 128 per pair, past vpmaddubsw's int16: widen to int16 and
// use vpmaddwd, exact for every input.
inline __m256i block_dot(const BlockQ8_0& w, const BlockQ8_0& a) {
  const __m256i lo =
      _mm256_madd_epi16(_mm256_cvtepi8_epi16(load128(w.qs)), _mm256_cvtepi8_epi16(load128(a.qs)));
  const __m256i hi = _mm256_madd_epi16(_mm256_cvtepi8_epi16(load128(w.qs + 16)),
                                       _mm256_cvtepi8_epi16(load128(a.qs + 16)));
  return _mm256_add_epi32(lo, hi);
}

// The f16 in the low (kHigh: high) half of each int32 lane, as 8 floats.
template <bool kHigh>
inline __m256 halves_to_ps(__m256i g) {
  const __m256i h =
      kHigh ? _mm256_srli_epi32(g, 16) : _mm256_and_si256(g, _mm256_set1_epi32(0xFFFF));
  const __m256i packed = _mm256_packus_epi32(h, h);  // per lane: h0..h3 h0..h3 | h4..h7 h4..h7
  return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
}

// The f16 at the start of each of 8 blocks `kStride` bytes apart, as 8 floats. Gathers cost
// more here than scalar loads packed four to a register.
template <int kStride>
inline __m256 first_halves8(const void* blocks) {
  const auto* p = static_cast<const uint8_t*>(blocks);
  uint64_t packed[2];
  for (int i = 0; i < 2; ++i) {
    uint64_t v = 0;
    for (int j = 0; j < 4; ++j) {
      uint16_t h;
      std::memcpy(&h, p + (4 * i + j) * kStride, sizeof h);
      v |= uint64_t{h} << (16 * j);
    }
    packed[i] = v;
  }
  return _mm256_cvtph_ps(
      _mm_set_epi64x(static_cast<int64_t>(packed[1]), static_cast<int64_t>(packed[0])));
}
// The first 32 bits of each of 8 blocks.
template <int kStride>
inline __m256i first_words8(const void* blocks) {
  const auto* p = static_cast<const uint8_t*>(blocks);
  alignas(32) uint32_t words[8];
  for (int i = 0; i < 8; ++i) std::memcpy(&words[i], p + i * kStride, sizeof words[i]);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(words));
}

// Blocks with a min (Q4_1, Q5_1) add m_w * s_a per block; their first 32 bits are d then m,
// as the activation's are d then s, so one gather fetches both.
template <class W>
constexpr bool kHasMin = requires(W w) {
  w.m;
};

// Blocks whose scales are converted together.
constexpr int kGroup = 8;

// The blocks after the last group of 8, then the horizontal sums: the end of every row's dot,
// shared by the GEMV and the GEMM tiles so that both finish a row the same way.
template <class W, class A>
inline float finish_row(__m256 acc[2], __m256 acc_min, const W* w, const A* a, int64_t b,
                        int64_t nb) {
  float tail_min = 0.0f;
  for (; b < nb; ++b) {
    const __m256 s = _mm256_set1_ps(f16(w[b].d) * f16(a[b].d));
    acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot(w[b], a[b])), s, acc[0]);
    if constexpr (kHasMin<W>) tail_min += f16(w[b].m) * f16(a[b].s);
  }
  return hsum(_mm256_add_ps(acc[0], acc[1])) + hsum(acc_min) + tail_min;
}

template <class W, class A>
float vec_dot(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const W*>(w_row);
  const auto* a = static_cast<const A*>(a_row);
  const int64_t nb = k / kQK;

  // Two accumulators halve the FMA dependency chain.
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  __m256 acc_min = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + kGroup <= nb; b += kGroup) {
    prefetch_ahead(w + b, kGroup * sizeof(W));
    __m256 scale;
    if constexpr (kHasMin<W>) {
      const __m256i gw = first_words8<sizeof(W)>(w + b);
      const __m256i ga = first_words8<sizeof(A)>(a + b);
      scale = _mm256_mul_ps(halves_to_ps<false>(gw), halves_to_ps<false>(ga));
      acc_min = _mm256_fmadd_ps(halves_to_ps<true>(gw), halves_to_ps<true>(ga), acc_min);
    } else {
      scale = _mm256_mul_ps(first_halves8<sizeof(W)>(w + b), first_halves8<sizeof(A)>(a + b));
    }
#pragma GCC unroll 8
    for (int j = 0; j < kGroup; ++j) {
      const __m256 s = _mm256_permutevar8x32_ps(scale, _mm256_set1_epi32(j));
      const __m256 dot = _mm256_cvtepi32_ps(block_dot(w[b + j], a[b + j]));
      acc[j & 1] = _mm256_fmadd_ps(dot, s, acc[j & 1]);
    }
  }
  return finish_row(acc, acc_min, w, a, b, nb);
}

// ---- GEMM tiles: kMicroRows weight rows x kMicroTokens tokens per micro-kernel --------------
//
// Every output element keeps vec_dot's arithmetic: the same block_dot integers (the offset
// term of the activations is computed once per token), the same per-block scale (w_d · a_d,
// broadcast from either side and multiplied: the same product), the same two accumulators fed
// in the same order, the same finish_row. A weight block is unpacked once for the tokens of a
// micro-kernel, and each token's side is prepared once for all the rows of a tile. With 16
// ymm registers, 2 x 2 elements (two accumulators each) is what fits.
constexpr int kMicroRows = 2, kMicroTokens = 2;

// Q8_0 dots widen both sides to int16; the 4- and 5-bit ones take unsigned weights.
template <class W>
constexpr bool kSignedWeight = std::is_same_v<W, BlockQ8_0>;

// One block of one side, as the element dot takes it. Unsigned weights: x = the unpacked
// weights or the activations, y = 0 or the activations' offset pairs (offset · a, int16).
// Q8_0: x, y = elements 0..15 and 16..31 widened to int16. scale: the side's f16 scale,
// broadcast.
struct BlockOperand {
  __m256i x, y;
  __m256 scale;
};

template <class W>
inline BlockOperand weight_block(const W& w, __m256 scale) {
  if constexpr (kSignedWeight<W>) {
    return {_mm256_cvtepi8_epi16(load128(w.qs)), _mm256_cvtepi8_epi16(load128(w.qs + 16)), scale};
  } else if constexpr (std::is_same_v<W, BlockQ4_0>) {
    return {unpack_nibbles(w.qs), _mm256_setzero_si256(), scale};
  } else {
    return {_mm256_or_si256(unpack_nibbles(w.qs), fifth_bits(w.qh)), _mm256_setzero_si256(), scale};
  }
}
template <class W>
inline BlockOperand token_block(const BlockQ8_0& a, __m256 scale) {
  if constexpr (kSignedWeight<W>) {
    return {_mm256_cvtepi8_epi16(load128(a.qs)), _mm256_cvtepi8_epi16(load128(a.qs + 16)), scale};
  } else {
    constexpr int kOffset = std::is_same_v<W, BlockQ4_0> ? 8 : 16;
    const __m256i av = load256(a.qs);
    return {av, _mm256_maddubs_epi16(_mm256_set1_epi8(kOffset), av), scale};
  }
}
// block_dot of the two sides.
template <class W>
inline __m256i element_dot(const BlockOperand& w, const BlockOperand& a) {
  if constexpr (kSignedWeight<W>)
    return _mm256_add_epi32(_mm256_madd_epi16(w.x, a.x), _mm256_madd_epi16(w.y, a.y));
  return _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(w.x, a.x), a.y),
                           _mm256_set1_epi16(1));
}

// R rows x C tokens. w: R row pointers; prepared: C tokens' blocks ([groups * 8] each); a: the
// C activation rows (for finish_row's tail blocks); y: [C, ldy].
template <class W, int R, int C>
void gemm_micro(const W* const* w, const BlockOperand* const* prepared, const BlockQ8_0* const* a,
                int64_t groups, int64_t nb, float* y, size_t ldy) {
  __m256 acc[R][C][2];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c][0] = acc[r][c][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t b = g * kGroup;
    __m256 w_scales[R];
    for (int r = 0; r < R; ++r) w_scales[r] = first_halves8<sizeof(W)>(w[r] + b);
#pragma GCC unroll 8
    for (int j = 0; j < kGroup; ++j) {
      BlockOperand wb[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        wb[r] =
            weight_block(w[r][b + j], _mm256_permutevar8x32_ps(w_scales[r], _mm256_set1_epi32(j)));
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const BlockOperand& ab = prepared[c][b + j];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256 dot = _mm256_cvtepi32_ps(element_dot<W>(wb[r], ab));
          acc[r][c][j & 1] =
              _mm256_fmadd_ps(dot, _mm256_mul_ps(wb[r].scale, ab.scale), acc[r][c][j & 1]);
        }
      }
    }
  }
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r)
      y[c * ldy + r] = finish_row(acc[r][c], _mm256_setzero_ps(), w[r], a[c], groups * kGroup, nb);
}

template <class W>
using MicroFn = void (*)(const W* const*, const BlockOperand* const*, const BlockQ8_0* const*,
                         int64_t, int64_t, float*, size_t);
template <class W, int R, size_t... Cs>
constexpr std::array<MicroFn<W>, sizeof...(Cs)> micro_row(std::index_sequence<Cs...>) {
  return {gemm_micro<W, R, static_cast<int>(Cs) + 1>...};
}
template <class W, size_t... Rs>
constexpr auto micro_table(std::index_sequence<Rs...>) {
  return std::array<std::array<MicroFn<W>, kMicroTokens>, sizeof...(Rs)>{
      micro_row<W, static_cast<int>(Rs) + 1>(std::make_index_sequence<kMicroTokens>())...};
}
// kMicro<W>[R - 1][C - 1]: the micro-kernel for R rows and C tokens (the ragged edges too).
template <class W>
constexpr auto kMicro = micro_table<W>(std::make_index_sequence<kMicroRows>());

template <class W>
void gemm_tile(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data,
               size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQK, groups = nb / kGroup, blocks = groups * kGroup;
  // Grows to the largest k seen, then is reused: [kMicroTokens, blocks].
  thread_local std::vector<BlockOperand> prepared_buffer;
  if (prepared_buffer.size() < static_cast<size_t>(kMicroTokens * blocks))
    prepared_buffer.resize(static_cast<size_t>(kMicroTokens * blocks));
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  // Tokens outer: the few tokens' prepared blocks stay in L1 while the tile's rows stream past.
  for (int64_t c0 = 0; c0 < tokens; c0 += kMicroTokens) {
    const int cc = static_cast<int>(std::min<int64_t>(kMicroTokens, tokens - c0));
    const BlockQ8_0* a[kMicroTokens];
    const BlockOperand* prepared[kMicroTokens];
    for (int c = 0; c < cc; ++c) {
      a[c] = reinterpret_cast<const BlockQ8_0*>(abytes + (c0 + c) * a_stride);
      BlockOperand* out = prepared_buffer.data() + c * blocks;
      prepared[c] = out;
      for (int64_t g = 0; g < groups; ++g) {
        const __m256 a_scales = first_halves8<sizeof(BlockQ8_0)>(a[c] + g * kGroup);
        for (int j = 0; j < kGroup; ++j)
          *out++ = token_block<W>(a[c][g * kGroup + j],
                                  _mm256_permutevar8x32_ps(a_scales, _mm256_set1_epi32(j)));
      }
    }
    for (int64_t r0 = 0; r0 < rows; r0 += kMicroRows) {
      const int rr = static_cast<int>(std::min<int64_t>(kMicroRows, rows - r0));
      const W* w[kMicroRows];
      for (int r = 0; r < rr; ++r) w[r] = reinterpret_cast<const W*>(wbytes + (r0 + r) * w_stride);
      kMicro<W>[rr - 1][cc - 1](w, prepared, a, groups, nb, y + c0 * ldy + r0, ldy);
    }
  }
}

}  // namespace

VecDotFn avx2_vec_dot_q(DType weight) {
  switch (weight) {
    case DType::Q4_0:
      return vec_dot<BlockQ4_0, BlockQ8_0>;
    case DType::Q4_1:
      return vec_dot<BlockQ4_1, BlockQ8_1>;
    case DType::Q5_0:
      return vec_dot<BlockQ5_0, BlockQ8_0>;
    case DType::Q5_1:
      return vec_dot<BlockQ5_1, BlockQ8_1>;
    case DType::Q8_0:
      return vec_dot<BlockQ8_0, BlockQ8_0>;
    default:
      return nullptr;
  }
}

GemmTileFn avx2_gemm_tile_q(DType weight) {
  switch (weight) {
    case DType::Q4_0:
      return gemm_tile<BlockQ4_0>;
    case DType::Q5_0:
      return gemm_tile<BlockQ5_0>;
    case DType::Q8_0:
      return gemm_tile<BlockQ8_0>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
