// Q6_K's matmul on weights packed in groups of 16 rows (the Avx512 level; the driver is
// avx512/packed_matmul.h): the 16 rows in the lanes of a register, so one vpdpbusd takes 64
// products against a broadcast activation dword and each sub-block's scale multiplies 16 rows
// at once, where the GEMV on the file's rows (avx512/vec_dot_k.cpp, which defines the
// arithmetic) shuffles scales per row.
//
// A group's super-block b (16 rows; kSuperblockBytes = 16 · 208, the file's bytes reordered):
//   scales [4 words][16 rows][4 bytes]   word v: the row's int8 scales 4v..4v+3
//   ql     [32 chunks][16 rows][4 bytes] chunk c: bytes 4c..4c+3 of the row's ql
//   qh     [16 chunks][16 rows][4 bytes] chunk c: bytes 4c..4c+3 of the row's qh
// and after the group's nb super-blocks their f16 d's, [nb][16 rows], so that a super-block
// stays a whole number of cache lines. In half h of a super-block (128 elements), ql chunks
// 16h + j and 16h + 8 + j and qh chunk 8h + j (j < 8) hold elements 128h + 4j + 32i .. +3 for
// i = 0..3 (low nibbles of the first, of the second, high nibbles of the first, of the second,
// each with bit pair i of the qh bytes on top): sub-block 8h + 2i + j / 4.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512/chains.h"
#include "tern/kernels/cpu/arch/x86/avx512/k_common.h"
#include "tern/kernels/cpu/arch/x86/avx512/packed_matmul.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"

namespace tern::cpu {
namespace {

constexpr int kRows = kGroupRows;
constexpr int64_t kScalesAt = 0, kQlAt = 4 * 64, kQhAt = kQlAt + 32 * 64;
constexpr int64_t kSuperblockBytes = kQhAt + 16 * 64;
static_assert(kSuperblockBytes == kRows * int64_t{sizeof(BlockQ6_K) - sizeof(uint16_t)});
constexpr int64_t kDBytes = kRows * int64_t{sizeof(uint16_t)};  // a super-block's d's

size_t group_bytes(int64_t nb) {
  return static_cast<size_t>((nb * (kSuperblockBytes + kDBytes) + 63) / 64 * 64);
}

void pack_group(const std::byte* w_data, size_t w_stride, int n, int64_t nb, std::byte* group) {
  std::memset(group, 0, group_bytes(nb));
  std::byte* d = group + nb * kSuperblockBytes;
  for (int r = 0; r < n; ++r) {
    const auto* row = reinterpret_cast<const BlockQ6_K*>(w_data + r * w_stride);
    for (int64_t b = 0; b < nb; ++b) {
      std::byte* sb = group + b * kSuperblockBytes;
      for (int c = 0; c < 32; ++c)
        std::memcpy(sb + kQlAt + (c * kRows + r) * 4, row[b].ql + 4 * c, 4);
      for (int c = 0; c < 16; ++c)
        std::memcpy(sb + kQhAt + (c * kRows + r) * 4, row[b].qh + 4 * c, 4);
      for (int v = 0; v < 4; ++v)
        std::memcpy(sb + kScalesAt + (v * kRows + r) * 4, row[b].scales + 4 * v, 4);
      std::memcpy(d + b * kDBytes + r * 2, &row[b].d, 2);
    }
  }
}

// Sub-block s's int8 scale of the 16 rows, sign-extended to int32 lanes.
inline __m512i scale_of(const __m512i* words, int s) {
  return _mm512_srai_epi32(_mm512_slli_epi32(words[s / 4], 24 - 8 * (s % 4)), 24);
}

// The 16 rows' quants (0..63) of elements 128h + 4j + 32i .. +3, i = 0..3, from the group's
// super-block sb: w[i].
inline void unpack_quants(const std::byte* sb, int h, int j, __m512i* w) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  const __m512i l0 = load_line(sb + kQlAt + (16 * h + j) * 64);
  const __m512i l1 = load_line(sb + kQlAt + (16 * h + 8 + j) * 64);
  const __m512i qh = load_line(sb + kQhAt + (8 * h + j) * 64);
  // 0xF8: A | (B & C) — the nibble (already alone in its byte) and two bits of qh.
  w[0] =
      _mm512_ternarylogic_epi32(_mm512_and_si512(l0, low4), _mm512_slli_epi32(qh, 4), bits45, 0xF8);
  w[1] =
      _mm512_ternarylogic_epi32(_mm512_and_si512(l1, low4), _mm512_slli_epi32(qh, 2), bits45, 0xF8);
  w[2] =
      _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(l0, 4), low4), qh, bits45, 0xF8);
  w[3] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(l1, 4), low4),
                                   _mm512_srli_epi32(qh, 2), bits45, 0xF8);
}

inline __m512i act_dword(const BlockQ8_K& a, int at) {
  int32_t v;
  std::memcpy(&v, a.qs + at, 4);
  return _mm512_set1_epi32(v);
}

// -32 · the activations' sum over sub-block s: the q - 32 offset of the chains16 arithmetic,
// where the dots take the quants unsigned.
inline __m512i offset_of(const BlockQ8_K& a, int s) { return _mm512_set1_epi32(-32 * a.bsums[s]); }

// A super-block's chain step for 16 rows: S joins by f16(d) · a.d.
inline __m512 join_chain(__m512 chain, __m512i s, const std::byte* d16, float a_d) {
  const __m512 d =
      _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d16))),
                    _mm512_set1_ps(a_d));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), d, chain);
}

struct Q6KLayout {
  using Act = BlockQ8_K;
  struct Term {};  // the offsets come from the bsums as they are
  static constexpr int64_t kBlockElems = kQKK;
  static Term term(const BlockQ8_K&) { return {}; }
  static size_t group_bytes(int64_t nb) { return tern::cpu::group_bytes(nb); }
  static void pack_group(const std::byte* w, size_t stride, int n, int64_t nb, std::byte* out) {
    tern::cpu::pack_group(w, stride, n, nb, out);
  }

  // One token, kGroups groups side by side: each activation dword broadcast once for all.
  template <int kGroups>
  static void dots_one_token(const std::byte* const* groups, int64_t nb,
                             const DotTokens<Q6KLayout>& a, float* const* y, const int* rows) {
    GroupChains<1, kGroups> chains;
    chains.zero(1);
    const BlockQ8_K* act = a.act(0);
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* sb[kGroups];
      __m512i words[kGroups][4], s[kGroups];
      for (int g = 0; g < kGroups; ++g) {
        sb[g] = groups[g] + b * kSuperblockBytes;
        prefetch_lines(sb[g], kQlAt);
        for (int v = 0; v < 4; ++v) words[g][v] = _mm512_loadu_si512(sb[g] + kScalesAt + 64 * v);
        s[g] = _mm512_setzero_si512();
      }
      for (int h = 0; h < 2; ++h)
        for (int half_j = 0; half_j < 2; ++half_j) {
          __m512i acc[kGroups][4];
          for (int i = 0; i < 4; ++i) {
            const __m512i offset = offset_of(act[b], 8 * h + 2 * i + half_j);
            for (int g = 0; g < kGroups; ++g) acc[g][i] = offset;
          }
          for (int j = 4 * half_j; j < 4 * half_j + 4; ++j) {
            __m512i x[4];
            for (int i = 0; i < 4; ++i) x[i] = act_dword(act[b], 128 * h + 32 * i + 4 * j);
            for (int g = 0; g < kGroups; ++g) {
              __m512i w[4];
              unpack_quants(sb[g], h, j, w);
              for (int i = 0; i < 4; ++i) acc[g][i] = _mm512_dpbusd_epi32(acc[g][i], w[i], x[i]);
            }
          }
          for (int g = 0; g < kGroups; ++g)
            for (int i = 0; i < 4; ++i)
              s[g] = _mm512_add_epi32(
                  s[g], _mm512_mullo_epi32(acc[g][i], scale_of(words[g], 8 * h + 2 * i + half_j)));
        }
      for (int g = 0; g < kGroups; ++g) {
        const std::byte* d16 = groups[g] + nb * kSuperblockBytes + b * kDBytes;
        chains.c[0][g][b % kChains] = join_chain(chains.c[0][g][b % kChains], s[g], d16, act[b].d);
      }
    }
    chains.store(1, y, 0, rows);
  }

  // 2..kMaxDotTokens tokens: each weight line unpacked once for all of them.
  template <int kGroups>
  static void dots(const std::byte* const* groups, int64_t nb, const DotTokens<Q6KLayout>& a,
                   float* const* y, size_t ldy, const int* rows) {
    GroupChains<kMaxDotTokens, kGroups> chains;
    chains.zero(a.tokens);
    for (int64_t b = 0; b < nb; ++b) {
      for (int g = 0; g < kGroups; ++g) {
        const std::byte* sb = groups[g] + b * kSuperblockBytes;
        prefetch_lines(sb, kQlAt);
        __m512i words[4];
        for (int v = 0; v < 4; ++v) words[v] = _mm512_loadu_si512(sb + kScalesAt + 64 * v);
        __m512i s[kMaxDotTokens];
        for (int64_t t = 0; t < a.tokens; ++t) s[t] = _mm512_setzero_si512();
        for (int h = 0; h < 2; ++h)
          for (int half_j = 0; half_j < 2; ++half_j) {
            __m512i w[4][4], sc[4];  // w[j - 4 half_j][i]
            for (int j = 0; j < 4; ++j) unpack_quants(sb, h, 4 * half_j + j, w[j]);
            for (int i = 0; i < 4; ++i) sc[i] = scale_of(words, 8 * h + 2 * i + half_j);
            for (int64_t t = 0; t < a.tokens; ++t) {
              const BlockQ8_K& act = a.act(t)[b];
              for (int i = 0; i < 4; ++i) {
                __m512i acc = offset_of(act, 8 * h + 2 * i + half_j);
                for (int j = 0; j < 4; ++j)
                  acc = _mm512_dpbusd_epi32(
                      acc, w[j][i], act_dword(act, 128 * h + 32 * i + 4 * (4 * half_j + j)));
                s[t] = _mm512_add_epi32(s[t], _mm512_mullo_epi32(acc, sc[i]));
              }
            }
          }
        const std::byte* d16 = groups[g] + nb * kSuperblockBytes + b * kDBytes;
        for (int64_t t = 0; t < a.tokens; ++t)
          chains.c[t][g][b % kChains] =
              join_chain(chains.c[t][g][b % kChains], s[t], d16, a.act(t)[b].d);
      }
    }
    chains.store(a.tokens, y, ldy, rows);
  }
};

}  // namespace

const PackedKernels* chains16_packed_q6_k() { return &kPacked<Q6KLayout>; }
GemmTileFn chains16_gemm_q6_k() { return gemm<Q6KLayout>; }

}  // namespace tern::cpu
