// AVX-512 VNNI dot kernels of the "q" family: Q4_1, Q5_0, Q5_1 weight rows against Q8_0 / Q8_1
// activation rows (see vec_dot_isa.h, layouts in blocks/block_layouts.h). Q4_0 and Q8_0 take the
// 16-chain arithmetic on both AVX-512 levels (avx512/vec_dot_q4_0_q8_0.cpp, avx512/q_packed.h).
//
// Two blocks share a 512-bit register (one per 256-bit half), so one vpdpbusd does 64
// products. vpdpbusd multiplies unsigned by signed bytes: the weights are unsigned already and
// Q5_0's offset (16) comes off as 16 * sum(a), exact for every input. The f16 scales of 16
// blocks are converted together, and each pair's float work is one permute, one convert and
// one FMA.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512/avx512_common.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// ---- two blocks per 512-bit register -------------------------------------------------------

// Two blocks' qs, each in two 128-bit lanes: [qs0, qs0, qs1, qs1].
inline __m512i load_qs2(const uint8_t* qs0, const uint8_t* qs1) {
  const __m512i x = _mm512_broadcast_i32x4(load128(qs0));
  return _mm512_mask_broadcast_i32x4(x, 0xFF00, load128(qs1));
}
// 64 bytes: block 0's low nibbles (elements 0..15), its high nibbles times 16 (elements
// 16..31), then block 1's. Leaving the high nibbles in place saves a shift; their lanes' sums
// are scaled by 1/16 in float instead, which is exact.
inline __m512i nibbles_in_place2(const uint8_t* qs0, const uint8_t* qs1) {
  const __m512i keep = _mm512_setr_epi64(0x0F0F0F0F0F0F0F0F, 0x0F0F0F0F0F0F0F0F, 0xF0F0F0F0F0F0F0F0,
                                         0xF0F0F0F0F0F0F0F0, 0x0F0F0F0F0F0F0F0F, 0x0F0F0F0F0F0F0F0F,
                                         0xF0F0F0F0F0F0F0F0, 0xF0F0F0F0F0F0F0F0);
  return _mm512_and_si512(load_qs2(qs0, qs1), keep);
}
// 64 bytes 0..15: block 0's elements 0..31, then block 1's (a fifth bit on top of a nibble
// times 16 would not fit a byte, so Q5 types shift the high nibbles down).
inline __m512i unpack_nibbles2(const uint8_t* qs0, const uint8_t* qs1) {
  const __m512i x =
      _mm512_srlv_epi64(load_qs2(qs0, qs1), _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
  return _mm512_and_si512(x, _mm512_set1_epi8(0x0F));
}
// Adds 16 to byte j where bit j of the two blocks' qh (block 1's in the high 32 bits) is set.
inline __m512i add_fifth_bits2(__m512i q, const uint8_t* qh0, const uint8_t* qh1) {
  const uint64_t bits = load_u32(qh0) | static_cast<uint64_t>(load_u32(qh1)) << 32;
  return _mm512_mask_add_epi8(q, _cvtu64_mask64(bits), q, _mm512_set1_epi8(16));
}

// sum (q - offset) * a per block as int32 lanes (8 per block); q unsigned, a signed.
template <int kOffset>
inline __m512i dot_u8_s8(__m512i q, __m512i a) {
  const __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, a);
  if constexpr (kOffset == 0) return sum;
  return _mm512_sub_epi32(
      sum, _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(kOffset), a));
}
// The integer dots of blocks w[0], w[1] with a[0], a[1], as 8 int32 partial sums each.
inline __m512i pair_dot(const BlockQ4_1* w, const BlockQ8_1* a) {
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles_in_place2(w[0].qs, w[1].qs),
                             load2x256(a[0].qs, a[1].qs));
}
inline __m512i pair_dot(const BlockQ5_0* w, const BlockQ8_0* a) {
  const __m512i q = add_fifth_bits2(unpack_nibbles2(w[0].qs, w[1].qs), w[0].qh, w[1].qh);
  return dot_u8_s8<16>(q, load2x256(a[0].qs, a[1].qs));
}
inline __m512i pair_dot(const BlockQ5_1* w, const BlockQ8_1* a) {
  const __m512i q = add_fifth_bits2(unpack_nibbles2(w[0].qs, w[1].qs), w[0].qh, w[1].qh);
  return dot_u8_s8<0>(q, load2x256(a[0].qs, a[1].qs));
}

// ---- one block per 256-bit register, for the blocks after the last group of 16 ---------------

inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i x = load128(qs);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0F));
}
inline __m256i add_fifth_bits(__m256i q, const uint8_t* qh) {
  return _mm256_mask_add_epi8(q, _cvtu32_mask32(load_u32(qh)), q, _mm256_set1_epi8(16));
}
template <int kOffset>
inline __m256i dot_u8_s8(__m256i q, __m256i a) {
  const __m256i sum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, a);
  if constexpr (kOffset == 0) return sum;
  return _mm256_sub_epi32(
      sum, _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(kOffset), a));
}
inline __m256i block_dot(const BlockQ4_1& w, const BlockQ8_1& a) {
  return dot_u8_s8<0>(unpack_nibbles(w.qs), load256(a.qs));
}
inline __m256i block_dot(const BlockQ5_0& w, const BlockQ8_0& a) {
  return dot_u8_s8<16>(add_fifth_bits(unpack_nibbles(w.qs), w.qh), load256(a.qs));
}
inline __m256i block_dot(const BlockQ5_1& w, const BlockQ8_1& a) {
  return dot_u8_s8<0>(add_fifth_bits(unpack_nibbles(w.qs), w.qh), load256(a.qs));
}

// Blocks with a min (Q4_1, Q5_1) add m_w * s_a per block; their first 32 bits are d then m,
// as the activation's are d then s.
template <class W>
constexpr bool kHasMin = requires(W w) {
  w.m;
};
// Q4_1 keeps its high nibbles in place (pair_dot), its lanes 4..7 of each block weigh 1/16.
template <class W>
constexpr bool kInPlace = std::is_same_v<W, BlockQ4_1>;

// Blocks whose scales are converted together.
constexpr int kGroup = 16;
// Lane l of a pair's register takes block l / 8's scale; with high nibbles in place, lanes
// 4..7 of a block take it from the second table (the scales / 16). Pair j adds j.
template <class W>
inline __m512i pair_lanes_of() {
  return kInPlace<W> ? _mm512_setr_epi32(0, 0, 0, 0, 16, 16, 16, 16, 1, 1, 1, 1, 17, 17, 17, 17)
                     : _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
}

// The blocks after the last group of 16, then the horizontal sum: the end of every row's dot,
// shared by the GEMV and the GEMM tiles so that both finish a row the same way.
template <class W, class A>
inline float finish_row(const __m512 acc[2], __m512 acc_min, const W* w, const A* a, int64_t b,
                        int64_t nb) {
  __m256 acc_tail = _mm256_setzero_ps();
  float tail_min = 0.0f;
  for (; b < nb; ++b) {
    const __m256 s = _mm256_set1_ps(f16(w[b].d) * f16(a[b].d));
    acc_tail = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot(w[b], a[b])), s, acc_tail);
    if constexpr (kHasMin<W>) tail_min += f16(w[b].m) * f16(a[b].s);
  }
  const __m512 all = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), acc_min);
  return _mm512_reduce_add_ps(_mm512_add_ps(all, _mm512_zextps256_ps512(acc_tail))) + tail_min;
}

template <class W, class A>
float vec_dot(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const W*>(w_row);
  const auto* a = static_cast<const A*>(a_row);
  const int64_t nb = k / kQK;
  const __m512i pair_lanes = pair_lanes_of<W>();

  // Two accumulators halve the FMA dependency chain.
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  __m512 acc_min = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + kGroup <= nb; b += kGroup) {
    // The hardware prefetcher alone leaves the stream short of the memory's bandwidth.
    prefetch_ahead(w + b, kGroup * sizeof(W));
    __m512 scale;
    if constexpr (kHasMin<W>) {
      const auto* wb = reinterpret_cast<const uint8_t*>(w + b);
      const auto* ab = reinterpret_cast<const uint8_t*>(a + b);
      scale = _mm512_mul_ps(first_halves16<sizeof(W)>(wb), first_halves16<sizeof(A)>(ab));
      acc_min = _mm512_fmadd_ps(first_halves16<sizeof(W)>(wb + 2),
                                first_halves16<sizeof(A)>(ab + 2), acc_min);
    } else {
      scale = _mm512_mul_ps(first_halves16<sizeof(W)>(w + b), first_halves16<sizeof(A)>(a + b));
    }
    const __m512 scale16 = _mm512_mul_ps(scale, _mm512_set1_ps(1.0f / 16));
#pragma GCC unroll 8
    for (int j = 0; j < kGroup; j += 2) {
      const __m512i lanes = _mm512_add_epi32(pair_lanes, _mm512_set1_epi32(j));
      const __m512 s = kInPlace<W> ? _mm512_permutex2var_ps(scale, lanes, scale16)
                                   : _mm512_permutexvar_ps(lanes, scale);
      const __m512 dot = _mm512_cvtepi32_ps(pair_dot(w + b + j, a + b + j));
      acc[(j / 2) & 1] = _mm512_fmadd_ps(dot, s, acc[(j / 2) & 1]);
    }
  }
  return finish_row(acc, acc_min, w, a, b, nb);
}

// ---- GEMM tiles (Q5_0): kMicroRows weight rows x kMicroTokens tokens per micro-kernel -------
//
// Every output element keeps vec_dot's arithmetic: the same int32 lanes per pair of blocks
// (the offset term is folded into the vpdpbusd's starting value instead of subtracted after
// it, the same integers), the same scale per lane, the same two accumulators fed in the same
// order, the same finish_row. What changes is what is shared: a weight pair is unpacked once
// for all the tokens of a micro-kernel, and each token's side (operand, offset term, permuted
// scales) is prepared once for all the rows of a tile.

// 3 x 3 measured best on 2048 x 2048, T = 64, when these tiles served Q4_0 too (2 x 4 alike,
// 4 x 2 slower).
template <class W>
constexpr int kMicroRows = 3;
template <class W>
constexpr int kMicroTokens = 3;

// One pair of blocks as a micro-kernel's element dot takes it, from either side: the vpdpbusd
// operand, the int32 lanes the dot starts from (the activations' side: minus the offset
// term) and each lane's scale.
struct PairOperand {
  __m512i q;
  __m512i start;
  __m512 scale;
};

// The activation side of a pair, prepared per token for every row of a tile.
template <class W>
inline void prepare_token_pair(const BlockQ8_0* a, __m512i lanes, __m512 a_scales,
                               PairOperand* out) {
  const __m512i av = load2x256(a[0].qs, a[1].qs);
  out->scale = _mm512_permutexvar_ps(lanes, a_scales);  // low 4 bits: the block within the group
  out->q = av;
  // The weights' offset (16) times a.
  const __m512i offset_term = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(16), av);
  out->start = _mm512_sub_epi32(_mm512_setzero_si512(), offset_term);
}

// The weight side of a pair, per row, shared by the micro-kernel's tokens.
template <class W>
inline PairOperand weight_pair(const W* w, __m512i lanes, __m512 w_scales) {
  PairOperand p;
  p.q = add_fifth_bits2(unpack_nibbles2(w[0].qs, w[1].qs), w[0].qh, w[1].qh);
  p.scale = _mm512_permutexvar_ps(lanes, w_scales);
  return p;
}

inline __m512i element_dot(const PairOperand& w, const PairOperand& a) {
  return _mm512_dpbusd_epi32(a.start, w.q, a.q);
}

// R rows x C tokens. w: R row pointers; prepared: C tokens' pairs ([groups * 8] each);
// a: the C activation rows (for finish_row's tail blocks); y: [C, ldy].
template <class W, int R, int C>
void gemm_micro(const W* const* w, const PairOperand* const* prepared, const BlockQ8_0* const* a,
                int64_t groups, int64_t nb, float* y, size_t ldy) {
  __m512 acc[R][C][2];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c][0] = acc[r][c][1] = _mm512_setzero_ps();
  const __m512i pair_lanes = pair_lanes_of<W>();
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t b = g * kGroup;
    __m512 w_scales[R];
    for (int r = 0; r < R; ++r) w_scales[r] = first_halves16<sizeof(W)>(w[r] + b);
#pragma GCC unroll 8
    for (int j = 0; j < kGroup; j += 2) {
      const __m512i lanes = _mm512_add_epi32(pair_lanes, _mm512_set1_epi32(j));
      PairOperand wp[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) wp[r] = weight_pair(w[r] + b + j, lanes, w_scales[r]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const PairOperand& ap = prepared[c][g * (kGroup / 2) + j / 2];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512 dot = _mm512_cvtepi32_ps(element_dot(wp[r], ap));
          acc[r][c][(j / 2) & 1] =
              _mm512_fmadd_ps(dot, _mm512_mul_ps(wp[r].scale, ap.scale), acc[r][c][(j / 2) & 1]);
        }
      }
    }
  }
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r)
      y[c * ldy + r] = finish_row(acc[r][c], _mm512_setzero_ps(), w[r], a[c], groups * kGroup, nb);
}

template <class W>
using MicroFn = void (*)(const W* const*, const PairOperand* const*, const BlockQ8_0* const*,
                         int64_t, int64_t, float*, size_t);
// kMicro<W>[R - 1][C - 1]: the micro-kernel for R rows and C tokens (the ragged edges too).
template <class W, int R, size_t... Cs>
constexpr std::array<MicroFn<W>, sizeof...(Cs)> micro_row(std::index_sequence<Cs...>) {
  return {gemm_micro<W, R, static_cast<int>(Cs) + 1>...};
}
template <class W, size_t... Rs>
constexpr auto micro_table(std::index_sequence<Rs...>) {
  return std::array<std::array<MicroFn<W>, kMicroTokens<W>>, sizeof...(Rs)>{
      micro_row<W, static_cast<int>(Rs) + 1>(std::make_index_sequence<kMicroTokens<W>>())...};
}
template <class W>
constexpr auto kMicro = micro_table<W>(std::make_index_sequence<kMicroRows<W>>());

template <class W>
void gemm_tile(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data,
               size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQK, groups = nb / kGroup, pairs = groups * (kGroup / 2);
  // Grows to the largest k seen, then is reused: [kMicroTokens<W>, pairs].
  thread_local std::vector<PairOperand> prepared_buffer;
  if (prepared_buffer.size() < static_cast<size_t>(kMicroTokens<W> * pairs))
    prepared_buffer.resize(static_cast<size_t>(kMicroTokens<W> * pairs));
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  const __m512i pair_lanes = pair_lanes_of<W>();
  // Tokens outer: the few tokens' prepared pairs stay in L1 while the tile's rows stream past.
  for (int64_t c0 = 0; c0 < tokens; c0 += kMicroTokens<W>) {
    const int cc = static_cast<int>(std::min<int64_t>(kMicroTokens<W>, tokens - c0));
    const BlockQ8_0* a[kMicroTokens<W>];
    const PairOperand* prepared[kMicroTokens<W>];
    for (int c = 0; c < cc; ++c) {
      a[c] = reinterpret_cast<const BlockQ8_0*>(abytes + (c0 + c) * a_stride);
      PairOperand* out = prepared_buffer.data() + c * pairs;
      prepared[c] = out;
      for (int64_t g = 0; g < groups; ++g) {
        const __m512 a_scales = first_halves16<sizeof(BlockQ8_0)>(a[c] + g * kGroup);
        for (int j = 0; j < kGroup; j += 2)
          prepare_token_pair<W>(a[c] + g * kGroup + j,
                                _mm512_add_epi32(pair_lanes, _mm512_set1_epi32(j)), a_scales,
                                out++);
      }
    }
    for (int64_t r0 = 0; r0 < rows; r0 += kMicroRows<W>) {
      const int rr = static_cast<int>(std::min<int64_t>(kMicroRows<W>, rows - r0));
      const W* w[kMicroRows<W>];
      for (int r = 0; r < rr; ++r) w[r] = reinterpret_cast<const W*>(wbytes + (r0 + r) * w_stride);
      kMicro<W>[rr - 1][cc - 1](w, prepared, a, groups, nb, y + c0 * ldy + r0, ldy);
    }
  }
}

}  // namespace

VecDotFn avx512_vec_dot_q(DType weight) {
  switch (weight) {
    case DType::Q4_1:
      return vec_dot<BlockQ4_1, BlockQ8_1>;
    case DType::Q5_0:
      return vec_dot<BlockQ5_0, BlockQ8_0>;
    case DType::Q5_1:
      return vec_dot<BlockQ5_1, BlockQ8_1>;
    default:
      return nullptr;
  }
}

GemmTileFn avx512_gemm_tile_q(DType weight) {
  switch (weight) {
    case DType::Q5_0:
      return gemm_tile<BlockQ5_0>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
