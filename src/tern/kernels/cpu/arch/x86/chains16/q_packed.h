// The 16-chain Q4_0 and Q8_0 matmuls on weights packed in groups of 16 rows, shared by the
// AVX-512 level (chains16/matmul_q_packed.cpp: VNNI dots for every token count) and the AMX
// level (amx/gemm_q.cpp: the same dots up to kMaxVnniTokens, AMX tiles beyond). Each output
// element is exactly what the GEMV (chains16/vec_dot_q.cpp, where the arithmetic is defined)
// gives for its row. Internal linkage, so each of the two files compiles its own copy.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/chains16/chains.h"
#include "tern/kernels/cpu/arch/x86/chains16/q_layout.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/quants/quant_blocks.h"
#include "tern/kernels/cpu/stealing_split.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// ---- 1 to 26 tokens: VNNI dots, 16 rows per instruction --------------------------------------

// A call of the dots takes up to 15 tokens (their chains stay in L1); up to 26 tokens run as
// passes over each group while its weights are in L2. Beyond, the AMX tiles. One forward of a
// 1B-parameter Q4_0 model, 2 threads, ms: passes 74 / 91 / 107 / 117 / 141 for 17 / 21 / 24 /
// 26 / 32 tokens, the tiles 117-125 for all of 16-32 (one pass: 70 for 15, 20 for 1).
constexpr int kMaxDotTokens = 15;
constexpr int64_t kMaxVnniTokens = 26;

// What the dots take from each token's activation block besides its qs (read in place): the
// scale as a float and the integer term the unsigned weights add, Q4_0's (q = w + 8) 8 · Σ a
// and Q8_0's (w ^ 0x80 = w + 128) 128 · Σ a. [tokens][nb] each.
struct TokenTerms {
  std::vector<float> scale;
  std::vector<int32_t> offset;
};

template <class W>
void prepare_terms(const std::byte* a_data, size_t a_stride, int64_t tokens, int64_t nb,
                   TokenTerms& out) {
  constexpr int32_t kBias = std::is_same_v<W, BlockQ4_0> ? 8 : 128;
  out.scale.resize(static_cast<size_t>(tokens * nb));
  out.offset.resize(static_cast<size_t>(tokens * nb));
  for (int64_t t = 0; t < tokens; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(a_data + t * a_stride);
    for (int64_t b = 0; b < nb; ++b) {
      int32_t sum = 0;
      for (int j = 0; j < kQK; ++j) sum += a[b].qs[j];
      out.scale[static_cast<size_t>(t * nb + b)] = _cvtsh_ss(a[b].d);
      out.offset[static_cast<size_t>(t * nb + b)] = kBias * sum;
    }
  }
}

struct DotTokens {
  const std::byte* a;  // the Q8_0 activation rows
  size_t a_stride;
  int64_t tokens;
  const float* scale;  // TokenTerms, [tokens][nb]
  const int32_t* offset;
};

// A block's 16 rows as 8 registers of unsigned bytes, register c holding elements 4c..4c+3.
// Q4_0's high nibbles (registers 4-7) stay in place, 16 times their value: one AND instead of
// a shift and an AND, and block_sums divides their sum by 16 again, exactly.
template <class W>
inline void unsigned_weights(const std::byte* qs, __m512i u[8]) {
  if constexpr (std::is_same_v<W, BlockQ4_0>) {
    const __m512i low = _mm512_set1_epi8(0x0F), high = _mm512_set1_epi8(static_cast<char>(0xF0));
    for (int c = 0; c < 4; ++c) {
      const __m512i x = _mm512_loadu_si512(qs + 64 * c);
      u[c] = _mm512_and_si512(x, low);
      u[c + 4] = _mm512_and_si512(x, high);
    }
  } else {
    for (int c = 0; c < 8; ++c)
      u[c] = _mm512_xor_si512(_mm512_loadu_si512(qs + 64 * c), _mm512_set1_epi8(-128));
  }
}

// The 16 rows' exact sums of kN groups against one activation block: Σ u · a less the offset.
// Each activation dword is broadcast once for the kN groups.
template <class W, int kN>
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
    // Q4_0's second half is 16 · Σ h · a: every term a multiple of 16, so the shift is exact.
    if constexpr (std::is_same_v<W, BlockQ4_0>) second[n] = _mm512_srai_epi32(second[n], 4);
    sums[n] = _mm512_add_epi32(first[n], second[n]);
  }
}

// A thread reads its groups as kStreams streams in step: its share cut into that many parts,
// a group of each at a time. Measured on a decode-shaped pass over Qwen3-1.7B's matrices
// (2 threads, alternating in one process): one group at a time read 17.4 GiB/s for Q4_0 and
// 19.9 for Q8_0; four adjacent groups 20.4 and 22.9; four streams 21.9 and 23.6, the rate of
// a pass that only loads the bytes. The hardware prefetcher keeps more lines in flight for
// several streams than for one.
constexpr int kStreams = 4;

// One group per stream (kGroups of them) against up to 15 tokens: each block's weights
// unpacked once for all the tokens. y[g]: group g's first output of token 0.
template <class W, int kGroups>
void group_dots(const std::byte* const* groups, int64_t nb, const DotTokens& a, float* const* y,
                size_t ldy, const int* rows) {
  __m512 chains[kMaxDotTokens][kGroups][kChains];
  for (int64_t t = 0; t < a.tokens; ++t)
    for (int g = 0; g < kGroups; ++g)
      std::fill(chains[t][g], chains[t][g] + kChains, _mm512_setzero_ps());
  // Two groups' weights at a time stay in registers (16 of 32) while each token's activation
  // dwords are broadcast once for both. Against one group at a time (matmul_bench, packed
  // 2048 × 2048, one thread, in cache): Q4_0 at 4 tokens 124 → 92 µs, at 12 280 → 225; Q8_0
  // at 4 tokens 165 → 122.
  constexpr int kPair = kGroups % 2 == 0 ? 2 : 1;
  for (int64_t b = 0; b < nb; ++b) {
    for (int g0 = 0; g0 < kGroups; g0 += kPair) {
      __m512i u[kPair][8];
      __m512 w_scale[kPair];
      for (int n = 0; n < kPair; ++n) {
        const std::byte* qs = groups[g0 + n] + b * kBlockQsBytes<W>;
        for (int64_t off = 0; off < kBlockQsBytes<W>; off += 64) prefetch_l2_ahead(qs + off);
        unsigned_weights<W>(qs, u[n]);
        const auto* d =
            reinterpret_cast<const uint16_t*>(groups[g0 + n] + nb * kBlockQsBytes<W>) + b * kRows;
        w_scale[n] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d)));
      }
      for (int64_t t = 0; t < a.tokens; ++t) {
        const auto* block = reinterpret_cast<const BlockQ8_0*>(a.a + t * a.a_stride) + b;
        __m512i sums[kPair];
        block_sums<W, kPair>(u, block->qs, a.offset[t * nb + b], sums);
        const __m512 a_scale = _mm512_set1_ps(a.scale[t * nb + b]);
        for (int n = 0; n < kPair; ++n) {
          __m512& chain = chains[t][g0 + n][b % kChains];
          chain = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[n]), _mm512_mul_ps(w_scale[n], a_scale),
                                  chain);
        }
      }
    }
  }
  for (int g = 0; g < kGroups; ++g) {
    const auto live = static_cast<__mmask16>((1u << rows[g]) - 1);
    for (int64_t t = 0; t < a.tokens; ++t)
      _mm512_mask_storeu_ps(y[g] + t * ldy, live, sum_chains16(chains[t][g]));
  }
}

// The same for one token (a decode): each activation dword is broadcast once for all the
// groups rather than once per group, and a group's weights are unpacked as the dots take
// them. The same bits as group_dots; in cache, one thread: 35 → 45 GiB/s for Q4_0.
template <class W, int kGroups>
void group_dots_one_token(const std::byte* const* groups, int64_t nb, const DotTokens& a,
                          float* const* y, const int* rows) {
  __m512 chains[kGroups][kChains];
  for (int g = 0; g < kGroups; ++g) std::fill(chains[g], chains[g] + kChains, _mm512_setzero_ps());
  const auto* act = reinterpret_cast<const BlockQ8_0*>(a.a);
  for (int64_t b = 0; b < nb; ++b) {
    __m512i first[kGroups], second[kGroups];
    for (int g = 0; g < kGroups; ++g) {
      const std::byte* qs = groups[g] + b * kBlockQsBytes<W>;
      for (int64_t off = 0; off < kBlockQsBytes<W>; off += 64) prefetch_l2_ahead(qs + off);
      first[g] = _mm512_set1_epi32(-a.offset[b]);
      second[g] = _mm512_setzero_si512();
    }
    for (int c = 0; c < 4; ++c) {
      int32_t a0, a1;
      std::memcpy(&a0, act[b].qs + 4 * c, 4);
      std::memcpy(&a1, act[b].qs + 4 * c + 16, 4);
      const __m512i lo_a = _mm512_set1_epi32(a0), hi_a = _mm512_set1_epi32(a1);
      for (int g = 0; g < kGroups; ++g) {
        const std::byte* qs = groups[g] + b * kBlockQsBytes<W>;
        __m512i lo, hi;
        if constexpr (std::is_same_v<W, BlockQ4_0>) {
          const __m512i x = _mm512_loadu_si512(qs + 64 * c);
          lo = _mm512_and_si512(x, _mm512_set1_epi8(0x0F));
          hi = _mm512_and_si512(x, _mm512_set1_epi8(static_cast<char>(0xF0)));
        } else {
          lo = _mm512_xor_si512(_mm512_loadu_si512(qs + 64 * c), _mm512_set1_epi8(-128));
          hi = _mm512_xor_si512(_mm512_loadu_si512(qs + 64 * (c + 4)), _mm512_set1_epi8(-128));
        }
        first[g] = _mm512_dpbusd_epi32(first[g], lo, lo_a);
        second[g] = _mm512_dpbusd_epi32(second[g], hi, hi_a);
      }
    }
    const __m512 a_scale = _mm512_set1_ps(a.scale[b]);
    for (int g = 0; g < kGroups; ++g) {
      if constexpr (std::is_same_v<W, BlockQ4_0>) second[g] = _mm512_srai_epi32(second[g], 4);
      const __m512i sums = _mm512_add_epi32(first[g], second[g]);
      const auto* d =
          reinterpret_cast<const uint16_t*>(groups[g] + nb * kBlockQsBytes<W>) + b * kRows;
      const __m512 scale = _mm512_mul_ps(
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d))), a_scale);
      __m512& chain = chains[g][b % kChains];
      chain = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, chain);
    }
  }
  for (int g = 0; g < kGroups; ++g) {
    const auto live = static_cast<__mmask16>((1u << rows[g]) - 1);
    _mm512_mask_storeu_ps(y[g], live, sum_chains16(chains[g]));
  }
}

// ---- the drivers -------------------------------------------------------------------------------

// The matmul as passes of the VNNI dots, a thread's groups consecutive. `group_at(g, scratch)`
// gives group g's packed bytes: in place, or packed into `scratch`.
template <class W, class GroupAt>
void matmul_dots(int64_t k, GroupAt group_at, int64_t rows, const void* a_data, size_t a_stride,
                 int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQK, groups = (rows + kRows - 1) / kRows;
  const auto* abytes = static_cast<const std::byte*>(a_data);
  auto rows_of = [=](int64_t g) {
    return static_cast<int>(std::min<int64_t>(kRows, rows - g * kRows));
  };
  thread_local TokenTerms terms;
  prepare_terms<W>(abytes, a_stride, tokens, nb, terms);
  // Pointers, not the thread_local `terms`: in the parallel region that name would be the
  // worker threads' own (empty) one.
  const float* scale = terms.scale.data();
  const int32_t* offset = terms.offset.data();
  read_in_streams<kStreams>(groups, [&](const int64_t* at, int count) {
    // Where weights in the file's layout are packed as the dots reach them; kept per thread.
    thread_local std::vector<std::byte> scratch[kStreams];
    const std::byte* group[kStreams];
    float* out[kStreams];
    int rows_in[kStreams];
    for (int s = 0; s < count; ++s) {
      group[s] = group_at(at[s], scratch[s]);
      rows_in[s] = rows_of(at[s]);
    }
    for (int64_t t0 = 0; t0 < tokens; t0 += kMaxDotTokens) {
      const DotTokens dot{abytes + t0 * a_stride, a_stride,
                          std::min<int64_t>(kMaxDotTokens, tokens - t0), scale + t0 * nb,
                          offset + t0 * nb};
      for (int s = 0; s < count; ++s) out[s] = y + t0 * ldy + at[s] * kRows;
      if (count == kStreams) {
        if (tokens == 1) {
          group_dots_one_token<W, kStreams>(group, nb, dot, out, rows_in);
        } else {
          group_dots<W, kStreams>(group, nb, dot, out, ldy, rows_in);
        }
        continue;
      }
      for (int s = 0; s < count; ++s)
        group_dots<W, 1>(group + s, nb, dot, out + s, ldy, rows_in + s);
    }
  });
}

// The matmul on AMX tiles (27 tokens and more), a thread's groups consecutive: amx/gemm_q.cpp,
// the only file whose drivers have kTiles.
template <class W, class GroupAt>
void matmul_tiles(int64_t k, GroupAt group_at, int64_t rows, const void* a_data, size_t a_stride,
                  int64_t tokens, float* y, size_t ldy);

// Every group through the kernel that fits the token count. Without tiles (kTiles false: a CPU
// with AVX-512 VNNI and no AMX) every token count runs as passes of the dots.
template <class W, bool kTiles, class GroupAt>
void matmul_groups(int64_t k, GroupAt group_at, int64_t rows, const void* a_data, size_t a_stride,
                   int64_t tokens, float* y, size_t ldy) {
  if constexpr (kTiles) {
    if (tokens > kMaxVnniTokens) {
      matmul_tiles<W>(k, group_at, rows, a_data, a_stride, tokens, y, ldy);
      return;
    }
  }
  matmul_dots<W>(k, group_at, rows, a_data, a_stride, tokens, y, ldy);
}

template <class W, bool kTiles>
void matmul_packed(int64_t k, const void* packed, int64_t rows, const void* a_data, size_t a_stride,
                   int64_t tokens, float* y, size_t ldy) {
  const auto* base = static_cast<const std::byte*>(packed);
  const size_t stride = group_bytes<W>(k / kQK);
  matmul_groups<W, kTiles>(
      k, [=](int64_t g, std::vector<std::byte>&) { return base + g * stride; }, rows, a_data,
      a_stride, tokens, y, ldy);
}

// Weights in the file's layout: each thread packs a group before using it (the same bits as
// packed weights; the packing costs about what the weights' first unpacking would).
template <class W, bool kTiles>
void gemm(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data,
          size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQK;
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  auto group_at = [=](int64_t g, std::vector<std::byte>& scratch) {
    // vectors of std::byte are not 64-byte aligned: over-allocate and align.
    scratch.resize(group_bytes<W>(nb) + 64);
    auto* out =
        reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
    pack_group<W>(wbytes + g * kRows * w_stride, w_stride,
                  static_cast<int>(std::min<int64_t>(kRows, rows - g * kRows)), nb, out);
    return static_cast<const std::byte*>(out);
  };
  matmul_groups<W, kTiles>(k, group_at, rows, a_data, a_stride, tokens, y, ldy);
}

template <class W, bool kTiles>
constexpr PackedKernels kPacked{kRows, packed_bytes<W>, pack<W>, matmul_packed<W, kTiles>};

template <bool kTiles>
GemmTileFn gemm_of(DType weight) {
  switch (weight) {
    case DType::Q4_0:
      return gemm<BlockQ4_0, kTiles>;
    case DType::Q8_0:
      return gemm<BlockQ8_0, kTiles>;
    default:
      return nullptr;
  }
}

template <bool kTiles>
const PackedKernels* packed_of(DType weight) {
  switch (weight) {
    case DType::Q4_0:
      return &kPacked<BlockQ4_0, kTiles>;
    case DType::Q8_0:
      return &kPacked<BlockQ8_0, kTiles>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace tern::cpu
