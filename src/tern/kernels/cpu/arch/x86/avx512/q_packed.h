// The 16-chain matmuls of 32-element blocks against Q8_0 activations on weights packed in groups
// of 16 rows: the dots every such layout shares, and Q4_0's and Q8_0's layout
// (avx512/q_layout.h), used by the AVX-512 level (avx512/matmul_q_packed.cpp: VNNI dots for
// every token count) and the AMX level (amx/gemm_q.cpp: the same dots up to kMaxVnniTokens, AMX
// tiles beyond); the affine groups' layout is avx512/matmul_affine_packed.cpp's. The driver is
// avx512/packed_matmul.h; each output element is exactly what the GEMV
// (avx512/vec_dot_q4_0_q8_0.cpp and generic/vec_dot_affine.cpp, where the arithmetic is defined)
// gives for its row. Internal linkage, so each file compiles its own copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512/chains.h"
#include "tern/kernels/cpu/arch/x86/avx512/packed_matmul.h"
#include "tern/kernels/cpu/arch/x86/avx512/q_layout.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// Up to this many tokens the Amx level takes the VNNI dots; beyond, the AMX tiles. One forward
// of a 1B-parameter Q4_0 model, 2 threads, ms: the dots 74 / 91 / 107 / 117 / 141 for 17 / 21 /
// 24 / 26 / 32 tokens, the tiles 117-125 for all of 16-32.
constexpr int64_t kMaxVnniTokens = 26;

// How a layout's 32-element blocks hold their codes in a packed group: as Q4_0's nibbles (4
// chunks of 4 bytes, elements 4c..4c+3 low and 16 + 4c.. high) or a byte each (8 chunks), and
// the xor that makes a byte the unsigned operand of vpdpbusd (Q8_0's signed weights: 0x80).
template <bool kNibbles_, char kFlip_>
struct BlockCodes {
  static constexpr bool kNibbles = kNibbles_;
  static constexpr char kFlip = kFlip_;
  static constexpr int64_t kQsBytes = (kNibbles ? 4 : 8) * 64;  // one block of a group's 16 rows
};

// A block's 16 rows as 8 registers of unsigned bytes, register c holding elements 4c..4c+3.
// The high nibbles (registers 4-7) stay in place, 16 times their value: one AND instead of a
// shift and an AND, and block_sums divides their sum by 16 again, exactly.
template <class C>
inline void unsigned_weights(const std::byte* qs, __m512i u[8]) {
  if constexpr (C::kNibbles) {
    const __m512i low = _mm512_set1_epi8(0x0F), high = _mm512_set1_epi8(static_cast<char>(0xF0));
    for (int c = 0; c < 4; ++c) {
      const __m512i x = _mm512_loadu_si512(qs + 64 * c);
      u[c] = _mm512_and_si512(x, low);
      u[c + 4] = _mm512_and_si512(x, high);
    }
  } else {
    for (int c = 0; c < 8; ++c) {
      u[c] = _mm512_loadu_si512(qs + 64 * c);
      if constexpr (C::kFlip != 0) u[c] = _mm512_xor_si512(u[c], _mm512_set1_epi8(C::kFlip));
    }
  }
}

// The 16 rows' exact sums of kN groups against one activation block: Σ u · a less the offset.
// Each activation dword is broadcast once for the kN groups.
template <class C, int kN>
inline void block_sums(const __m512i (*u)[8], const int8_t* a_qs, int32_t offset, __m512i* sums) {
  __m512i first[kN], second[kN];
  for (int n = 0; n < kN; ++n)
    first[n] = _mm512_set1_epi32(-offset), second[n] = _mm512_setzero_si512();
  for (int c = 0; c < 4; ++c) {
    int32_t a0, a1;
    std::memcpy(&a0, a_qs + 4 * c, 4);
    std::memcpy(&a1, a_qs + 4 * c + 16, 4);
    const __m512i lo_a = _mm512_set1_epi32(a0), hi_a = _mm512_set1_epi32(a1);
    for (int n = 0; n < kN; ++n) {
      first[n] = _mm512_dpbusd_epi32(first[n], u[n][c], lo_a);
      second[n] = _mm512_dpbusd_epi32(second[n], u[n][c + 4], hi_a);
    }
  }
  for (int n = 0; n < kN; ++n) {
    // The high nibbles' sum is 16 · Σ h · a: every term a multiple of 16, so the shift is exact.
    if constexpr (C::kNibbles) second[n] = _mm512_srai_epi32(second[n], 4);
    sums[n] = _mm512_add_epi32(first[n], second[n]);
  }
}

// The dots of a layout L of 32-element blocks against Q8_0 activations (Q4_0, Q8_0 and the
// affine groups). Besides packed_matmul.h's members, L gives
//   L::Codes                         its BlockCodes
//   L::qs(group, nb, b)              where block b's codes of a group's 16 rows lie
//   L::Scales, L::scales(group, nb, b)   what block b of a group's 16 rows is scaled by
//   L::offset(term)                  the integer the unsigned codes add to a block's sum
//   L::Acc                           what a token's 16 rows carry from block to block besides
//                                    their chains (value-initialised)
//   L::chain_of(b)                   the chain block b's sums go into
//   L::step(chain, acc, sums, scales, term, b)   block b's 16 exact sums into the rows' chain

// One group per stream (kGroups of them) against up to 15 tokens: each block's weights
// unpacked once for all the tokens. y[g]: group g's first output of token 0.
template <class L, int kGroups>
void group_dots(const std::byte* const* groups, int64_t nb, const DotTokens<L>& a, float* const* y,
                size_t ldy, const int* rows) {
  using C = typename L::Codes;
  GroupChains<kMaxDotTokens, kGroups> chains;
  chains.zero(a.tokens);
  typename L::Acc acc[kMaxDotTokens][kGroups] = {};
  // Two groups' weights at a time stay in registers (16 of 32) while each token's activation
  // dwords are broadcast once for both. Against one group at a time (matmul_bench, packed
  // 2048 × 2048, one thread, in cache): Q4_0 at 4 tokens 124 → 92 µs, at 12 280 → 225; Q8_0
  // at 4 tokens 165 → 122.
  constexpr int kPair = kGroups % 2 == 0 ? 2 : 1;
  for (int64_t b = 0; b < nb; ++b) {
    for (int g0 = 0; g0 < kGroups; g0 += kPair) {
      __m512i u[kPair][8];
      typename L::Scales scales[kPair];
      for (int n = 0; n < kPair; ++n) {
        const std::byte* qs = L::qs(groups[g0 + n], nb, b);
        for (int64_t off = 0; off < C::kQsBytes; off += 64) prefetch_stream_ahead(qs + off);
        unsigned_weights<C>(qs, u[n]);
        scales[n] = L::scales(groups[g0 + n], nb, b);
      }
      for (int64_t t = 0; t < a.tokens; ++t) {
        const typename L::Term& term = a.term(t, b);
        __m512i sums[kPair];
        block_sums<C, kPair>(u, a.act(t)[b].qs, L::offset(term), sums);
        for (int n = 0; n < kPair; ++n) {
          __m512& chain = chains.c[t][g0 + n][L::chain_of(b)];
          chain = L::step(chain, acc[t][g0 + n], sums[n], scales[n], term, b);
        }
      }
    }
  }
  chains.store(a.tokens, y, ldy, rows);
}

// The same for one token (a decode): each activation dword is broadcast once for all the
// groups rather than once per group, and a group's weights are unpacked as the dots take
// them. The same bits as group_dots; in cache, one thread: 35 → 45 GiB/s for Q4_0.
template <class L, int kGroups>
void group_dots_one_token(const std::byte* const* groups, int64_t nb, const DotTokens<L>& a,
                          float* const* y, const int* rows) {
  using C = typename L::Codes;
  GroupChains<1, kGroups> chains;
  chains.zero(1);
  typename L::Acc acc[kGroups] = {};
  const BlockQ8_0* act = a.act(0);
  for (int64_t b = 0; b < nb; ++b) {
    const typename L::Term& term = a.term(0, b);
    __m512i first[kGroups], second[kGroups];
    for (int g = 0; g < kGroups; ++g) {
      const std::byte* qs = L::qs(groups[g], nb, b);
      for (int64_t off = 0; off < C::kQsBytes; off += 64) prefetch_stream_ahead(qs + off);
      first[g] = _mm512_set1_epi32(-L::offset(term));
      second[g] = _mm512_setzero_si512();
    }
    for (int c = 0; c < 4; ++c) {
      int32_t a0, a1;
      std::memcpy(&a0, act[b].qs + 4 * c, 4);
      std::memcpy(&a1, act[b].qs + 4 * c + 16, 4);
      const __m512i lo_a = _mm512_set1_epi32(a0), hi_a = _mm512_set1_epi32(a1);
      for (int g = 0; g < kGroups; ++g) {
        const std::byte* qs = L::qs(groups[g], nb, b);
        __m512i lo, hi;
        if constexpr (C::kNibbles) {
          const __m512i x = _mm512_loadu_si512(qs + 64 * c);
          lo = _mm512_and_si512(x, _mm512_set1_epi8(0x0F));
          hi = _mm512_and_si512(x, _mm512_set1_epi8(static_cast<char>(0xF0)));
        } else {
          lo = _mm512_loadu_si512(qs + 64 * c);
          hi = _mm512_loadu_si512(qs + 64 * (c + 4));
          if constexpr (C::kFlip != 0) {
            lo = _mm512_xor_si512(lo, _mm512_set1_epi8(C::kFlip));
            hi = _mm512_xor_si512(hi, _mm512_set1_epi8(C::kFlip));
          }
        }
        first[g] = _mm512_dpbusd_epi32(first[g], lo, lo_a);
        second[g] = _mm512_dpbusd_epi32(second[g], hi, hi_a);
      }
    }
    for (int g = 0; g < kGroups; ++g) {
      if constexpr (C::kNibbles) second[g] = _mm512_srai_epi32(second[g], 4);
      __m512& chain = chains.c[0][g][L::chain_of(b)];
      chain = L::step(chain, acc[g], _mm512_add_epi32(first[g], second[g]),
                      L::scales(groups[g], nb, b), term, b);
    }
  }
  chains.store(1, y, 0, rows);
}

// The members every layout of 32-element blocks against Q8_0 shares: the driver's dots are the
// ones above.
template <class L>
struct Q8Dots {
  using Act = BlockQ8_0;
  static constexpr int64_t kBlockElems = kQK;
  template <int kGroups>
  static void dots_one_token(const std::byte* const* groups, int64_t nb, const DotTokens<L>& a,
                             float* const* y, const int* rows) {
    group_dots_one_token<L, kGroups>(groups, nb, a, y, rows);
  }
  template <int kGroups>
  static void dots(const std::byte* const* groups, int64_t nb, const DotTokens<L>& a,
                   float* const* y, size_t ldy, const int* rows) {
    group_dots<L, kGroups>(groups, nb, a, y, ldy, rows);
  }
};

// What Q4_0's and Q8_0's dots take from a token's activation block besides its qs (read in
// place): the scale as a float and the integer term the unsigned weights add, Q4_0's (q = w +
// 8) 8 · Σ a and Q8_0's (w ^ 0x80 = w + 128) 128 · Σ a.
struct ActTerm {
  float scale;
  int32_t offset;
};

// Q4_0 and Q8_0: per block, chain = fma(isum, w_scale · a_scale, chain). Two arrangements of a
// group's scales: after all its codes (q_layout.h), where the AMX tiles read them, or
// kScalesInline, each pair of blocks' 16 rows' scales in the 64 bytes before their codes, so
// that a group streams from one place: the Avx512 level's (decode of Qwen3-1.7B's shape, 2
// threads, medians of 3 alternating rounds: Q4_0 35.1 → 45.7 tok/s, Q8_0 20.5 → 22.5; prefill
// level).
template <class W, bool kScalesInline>
struct QLayout : Q8Dots<QLayout<W, kScalesInline>> {
  using Term = ActTerm;
  using Codes = BlockCodes<std::is_same_v<W, BlockQ4_0>, std::is_same_v<W, BlockQ4_0> ? 0 : -128>;
  using Scales = __m512;
  static_assert(Codes::kQsBytes == kBlockQsBytes<W>);
  static constexpr int64_t kScaleBytes = kRows * sizeof(uint16_t);               // one block's
  static constexpr int64_t kPairBytes = 2 * kScaleBytes + 2 * kBlockQsBytes<W>;  // inline
  static Term term(const BlockQ8_0& a) {
    constexpr int32_t kBias = std::is_same_v<W, BlockQ4_0> ? 8 : 128;
    int32_t sum = 0;
    for (int j = 0; j < kQK; ++j) sum += a.qs[j];
    return {_cvtsh_ss(a.d), kBias * sum};
  }
  static int32_t offset(const Term& term) { return term.offset; }
  static const std::byte* qs(const std::byte* group, int64_t, int64_t b) {
    if constexpr (kScalesInline)
      return group + b / 2 * kPairBytes + 2 * kScaleBytes + b % 2 * kBlockQsBytes<W>;
    return group + b * kBlockQsBytes<W>;
  }
  struct Acc {};
  static int64_t chain_of(int64_t b) { return b % kChains; }
  static Scales scales(const std::byte* group, int64_t nb, int64_t b) {
    const std::byte* d = kScalesInline ? group + b / 2 * kPairBytes + b % 2 * kScaleBytes
                                       : group + nb * kBlockQsBytes<W> + b * kScaleBytes;
    if (kScalesInline && b % 2 == 0) prefetch_stream_ahead(d);
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d)));
  }
  static __m512 step(__m512 chain, Acc&, __m512i sums, Scales w_scale, const Term& term, int64_t) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums),
                           _mm512_mul_ps(w_scale, _mm512_set1_ps(term.scale)), chain);
  }
  static size_t group_bytes(int64_t nb) {
    if constexpr (kScalesInline) return static_cast<size_t>((nb + 1) / 2 * kPairBytes);
    return tern::cpu::group_bytes<W>(nb);
  }
  static void pack_group(const std::byte* w, size_t stride, int n, int64_t nb, std::byte* out) {
    if constexpr (!kScalesInline) {
      tern::cpu::pack_group<W>(w, stride, n, nb, out);
    } else {
      // q_layout.h's arrangement one block at a time, each block's lines moved where they go.
      std::memset(out, 0, group_bytes(nb));
      std::vector<std::byte> block(tern::cpu::group_bytes<W>(1));
      for (int64_t b = 0; b < nb; ++b) {
        tern::cpu::pack_group<W>(w + b * sizeof(W), stride, n, 1, block.data());
        std::memcpy(const_cast<std::byte*>(qs(out, nb, b)), block.data(), kBlockQsBytes<W>);
        std::memcpy(out + b / 2 * kPairBytes + b % 2 * kScaleBytes, block.data() + kBlockQsBytes<W>,
                    kScaleBytes);
      }
    }
  }
};

// ---- the drivers -------------------------------------------------------------------------------

// The matmul on AMX tiles (27 tokens and more), a thread's groups consecutive: amx/gemm_q.cpp,
// the only file whose drivers have kTiles.
template <class W, class GroupAt>
void matmul_tiles(int64_t k, GroupAt group_at, int64_t rows, const void* a_data, size_t a_stride,
                  int64_t tokens, float* y, size_t ldy);

// Every group through the kernel that fits the token count. Without tiles (kTiles false: a CPU
// with AVX-512 VNNI and no AMX) every token count runs as passes of the dots.
template <class W, bool kTiles, class GroupAt>
void matmul_q(int64_t k, GroupAt group_at, int64_t rows, const void* a_data, size_t a_stride,
              int64_t tokens, float* y, size_t ldy) {
  if constexpr (kTiles) {
    if (tokens > kMaxVnniTokens) {
      matmul_tiles<W>(k, group_at, rows, a_data, a_stride, tokens, y, ldy);
      return;
    }
  }
  matmul_groups<QLayout<W, !kTiles>>(k, group_at, rows, a_data, a_stride, tokens, y, ldy);
}

template <class W, bool kTiles>
void matmul_packed_q(int64_t k, const void* packed, int64_t rows, const void* a_data,
                     size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  matmul_q<W, kTiles>(k, packed_groups<QLayout<W, !kTiles>>(packed, k), rows, a_data, a_stride,
                      tokens, y, ldy);
}

template <class W, bool kTiles>
void gemm_q(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data,
            size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  matmul_q<W, kTiles>(k, packing_groups<QLayout<W, !kTiles>>(w_data, w_stride, rows, k), rows,
                      a_data, a_stride, tokens, y, ldy);
}

template <class W, bool kTiles>
constexpr PackedKernels kPackedQ{kGroupRows, packed_bytes<QLayout<W, !kTiles>>,
                                 pack<QLayout<W, !kTiles>>, matmul_packed_q<W, kTiles>};

template <bool kTiles>
GemmTileFn gemm_of(DType weight) {
  switch (weight) {
    case DType::Q4_0:
      return gemm_q<BlockQ4_0, kTiles>;
    case DType::Q8_0:
      return gemm_q<BlockQ8_0, kTiles>;
    default:
      return nullptr;
  }
}

template <bool kTiles>
const PackedKernels* packed_of(DType weight) {
  switch (weight) {
    case DType::Q4_0:
      return &kPackedQ<BlockQ4_0, kTiles>;
    case DType::Q8_0:
      return &kPackedQ<BlockQ8_0, kTiles>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace tern::cpu
