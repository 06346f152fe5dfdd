// The Amx level's kernel for a few tokens (batched decode) of Q4_K, Q5_K and Q6_K weights, in
// AVX-512 VNNI (no tiles, so it is built with this folder's flags): exactly the GEMV's values (the
// arithmetic defined in avx512/vec_dot_k.cpp), with each weight super-block unpacked once for all
// the tokens instead of once per token and element.
//
// AMX tiles would be mostly empty for so few tokens and laying the weights out for them costs
// more than the products. Here, per row, a pair of super-blocks is unpacked into registers
// (quants, and scales laid out for superblock_ints) and every token's 16 int32 lanes per
// super-block are taken against them; per group of 16 super-blocks each token's exact S1 (and
// S2) join its 16 chains, lane j = super-block 16 g + j, as in the GEMV. Only the integers'
// path differs from the GEMV's, and integer sums are exact: the floats are the same.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512/chains.h"
#include "tern/kernels/cpu/arch/x86/avx512/k_common.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/stealing_split.h"

namespace tern::cpu {
namespace {

// What the GEMV takes from each token's super-blocks besides the quants, in the lanes of the
// groups of 16 super-blocks (lanes past the last super-block 0):
//   d     [tokens][groups][16]     a.d
//   bsums [tokens][groups][4][16]  Q4_K, Q5_K: the 32-element sums of sub-blocks 2i and 2i + 1
//                                  as an int16 pair, for VNNI against the mins' pairs
struct FewTokens {
  std::vector<float> d;
  std::vector<int32_t> bsums;
};

void prepare_few_tokens(const std::byte* a_data, size_t a_stride, int64_t tokens, int64_t nb,
                        bool with_bsums, FewTokens& out) {
  const int64_t groups = (nb + kChains - 1) / kChains, lanes = groups * kChains;
  out.d.assign(static_cast<size_t>(tokens * lanes), 0.0f);
  out.bsums.assign(with_bsums ? static_cast<size_t>(tokens * lanes * 4) : 0, 0);
  for (int64_t t = 0; t < tokens; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(a_data + t * a_stride);
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t g = b / kChains, lane = b % kChains;
      out.d[static_cast<size_t>(t * lanes + b)] = a[b].d;
      if (!with_bsums) continue;
      for (int i = 0; i < 4; ++i) {
        const int lo = a[b].bsums[4 * i] + a[b].bsums[4 * i + 1],
                  hi = a[b].bsums[4 * i + 2] + a[b].bsums[4 * i + 3];
        out.bsums[static_cast<size_t>(((t * groups + g) * 4 + i) * kChains + lane)] =
            static_cast<int32_t>(static_cast<uint16_t>(lo) | static_cast<uint32_t>(hi) << 16);
      }
    }
  }
}

// One super-block's weights: chunk j (64 quants, unsigned) against activations 64 j ..
// 64 j + 63, and per pair of chunks c the int16 scale of each lane of their packed 4-element
// sums (see superblock_ints); Q6_K also its -32 · scale per 16-element sub-block, for the
// offset against the activations' bsums.
struct UnpackedSuperblock {
  __m512i q[kChunks];
  __m512i scale[kChunks / 2];
  __m512i neg32_scale;  // Q6_K
};

// The int16 word v four times.
constexpr int64_t times4(int v) {
  return static_cast<int64_t>(static_cast<uint16_t>(v) * 0x0001000100010001ull);
}
// int16 lanes: per 128-bit lane L, words 0-3 = lo[L], words 4-7 = hi[L].
inline __m512i quads16(const int (&lo)[4], const int (&hi)[4]) {
  return _mm512_setr_epi64(times4(lo[0]), times4(hi[0]), times4(lo[1]), times4(hi[1]),
                           times4(lo[2]), times4(hi[2]), times4(lo[3]), times4(hi[3]));
}

// Q4_K / Q5_K; `mins` gets the 8 mins as int16 pairs (m_2i, m_2i+1) in int32 lanes 0-3.
template <class Block>
inline void unpack(const Block& w, UnpackedSuperblock& u, __m128i& mins) {
  const __m128i sm = unpack_scales_mins(w.scales);  // scales in bytes 0-7, mins 8-15
  mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
  const __m512i sc_m = _mm512_broadcast_i32x4(sm);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  // A 32-byte chunk of qs in both halves: low nibbles (sub-block 2j) below, high ones above.
  const __m512i nibble_shift = halves16(0, 4);
  __m512i qh;
  if constexpr (std::is_same_v<Block, BlockQ5_K>)
    qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh)));
  for (int j = 0; j < kChunks; ++j) {
    const __m512i bits =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * j)));
    __m512i q = _mm512_and_si512(_mm512_srlv_epi16(bits, nibble_shift), low4);
    if constexpr (std::is_same_v<Block, BlockQ5_K>) {
      // Bit s of qh[l] is the fifth bit of element l of sub-block s.
      const __mmask64 high = _mm512_test_epi8_mask(
          qh, _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * j))),
                                 _mm256_set1_epi8(static_cast<char>(1 << (2 * j + 1))), 1));
      q = _mm512_mask_add_epi8(q, high, q, _mm512_set1_epi8(0x10));
    }
    u.q[j] = q;
  }
  // Chunk 2c holds sub-blocks 4c (its lanes 0-7) and 4c + 1 (8-15), chunk 2c + 1 4c + 2 and
  // 4c + 3: packed, 128-bit lanes 0-1 take 4c then 4c + 2, lanes 2-3 4c + 1 then 4c + 3.
  for (int c = 0; c < kChunks / 2; ++c)
    u.scale[c] = _mm512_shuffle_epi8(
        sc_m, quads16({zx(4 * c), zx(4 * c), zx(4 * c + 1), zx(4 * c + 1)},
                      {zx(4 * c + 2), zx(4 * c + 2), zx(4 * c + 3), zx(4 * c + 3)}));
}

inline void unpack(const BlockQ6_K& w, UnpackedSuperblock& u, __m128i&) {
  const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
  // Per 128 elements, qh[l] holds the top bits of elements l, l+32, l+64, l+96 in bit pairs
  // 0-1, 2-3, 4-5, 6-7.
  const __m512i shift_a = halves16(4, 2), shift_b = halves16(0, 2);
  const __m256i sc16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales)));
  const __m512i sc = _mm512_zextsi256_si512(sc16);
  u.neg32_scale =
      _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5)));
  for (int half = 0; half < 2; ++half) {
    const __m512i ql = _mm512_loadu_si512(w.ql + 64 * half);
    const __m512i qh = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh + 32 * half)));
    u.q[2 * half] = _mm512_or_si512(_mm512_and_si512(ql, low4),
                                    _mm512_and_si512(_mm512_sllv_epi16(qh, shift_a), bits45));
    u.q[2 * half + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                        _mm512_and_si512(_mm512_srlv_epi16(qh, shift_b), bits45));
    // 128-bit lane L of a chunk's sums is sub-block 4 j + L: packed, lane L of chunks
    // 2 half and 2 half + 1 is sub-block 8 half + L, then 8 half + 4 + L.
    const int b = 8 * half;
    u.scale[half] = _mm512_permutexvar_epi16(
        quads16({b, b + 1, b + 2, b + 3}, {b + 4, b + 5, b + 6, b + 7}), sc);
  }
}

// 16 int32 lanes summing to the super-block's S1 (Q6_K: S) against activations a. VNNI sums
// 4 q · a per int32 lane, one sub-block's; those fit int16 (|4 · 63 · 128| < 2^15), so two
// chunks' are packed to int16 and scaled and summed in int32 by one more VNNI: 6 multiplies
// per super-block where the GEMV's maddubs / dpwssd pairs take 8. Integers, exact: the same S.
template <class Block>
inline __m512i superblock_ints(const UnpackedSuperblock& u, const BlockQ8_K& a) {
  __m512i sum = _mm512_setzero_si512();
  if constexpr (!kHasMins<Block>)  // Q6_K's quants are q + 32: -32 · Σ sc · bsum
    sum = _mm512_dpwssd_epi32(
        sum, _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums))),
        u.neg32_scale);
  for (int c = 0; c < kChunks / 2; ++c) {
    const __m512i x =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), u.q[2 * c], _mm512_loadu_si512(a.qs + 128 * c));
    const __m512i y = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u.q[2 * c + 1],
                                          _mm512_loadu_si512(a.qs + 128 * c + 64));
    sum = _mm512_dpwssd_epi32(sum, _mm512_packs_epi32(x, y), u.scale[c]);
  }
  return sum;
}

// Two super-blocks' 16 lanes folded to 8 each: block x in lanes 0-7, block y in lanes 8-15.
inline __m512i fold_pair(__m512i x, __m512i y) {
  return _mm512_add_epi32(_mm512_shuffle_i64x2(x, y, 0x44), _mm512_shuffle_i64x2(x, y, 0xEE));
}

// block_sums16 for 8 super-blocks in 4 registers (lanes 0-7; lanes 8-15 not defined): the
// same steps, fewer of them. Integer sums, so the order is free.
inline __m512i block_sums8(const __m512i d[4]) {
  auto add_unpacked32 = [](__m512i x, __m512i y) {
    return _mm512_add_epi32(_mm512_unpacklo_epi32(x, y), _mm512_unpackhi_epi32(x, y));
  };
  // 128-bit lane q of f: d0..d3's sums of their lane q.
  const __m512i e0 = add_unpacked32(d[0], d[1]), e1 = add_unpacked32(d[2], d[3]);
  const __m512i f = _mm512_add_epi32(_mm512_unpacklo_epi64(e0, e1), _mm512_unpackhi_epi64(e0, e1));
  // Lanes 0-3: blocks 0 2 4 6 (lanes q = 0, 1 summed), 4-7: 1 3 5 7 (q = 2, 3).
  const __m512i g =
      _mm512_add_epi32(_mm512_shuffle_i32x4(f, f, 0x88), _mm512_shuffle_i32x4(f, f, 0xDD));
  return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 0, 0, 0, 0, 0, 0, 0, 0),
                                  g);
}

// One row's weight scales of a group of 16 super-blocks, 0 past the row's end.
struct GroupScales {
  alignas(64) uint16_t d[kChains];
  alignas(64) uint16_t dmin[kChains];
  // [super-block][4]: the mins' int16 pairs (m_2i, m_2i+1), as unpacked.
  alignas(64) int32_t mins[kChains][4];

  void clear_from(int n) {
    for (int i = n; i < kChains; ++i) {
      d[i] = dmin[i] = 0;
      for (int j = 0; j < 4; ++j) mins[i][j] = 0;
    }
  }
  // mins transposed: register j lane i = pair j of super-block i.
  void load_mins(__m512i out[4]) const {
    __m512i z[4];  // super-blocks 4 k .. 4 k + 3
    for (int k = 0; k < 4; ++k) z[k] = _mm512_load_si512(mins[4 * k]);
    for (int j = 0; j < 4; ++j) {
      // Super-block i's pair j is lane 4 (i % 4) + j of z[i / 4]; z[1] and z[3] from index 16.
      const __m512i idx = _mm512_setr_epi32(j, 4 + j, 8 + j, 12 + j, 16 + j, 20 + j, 24 + j, 28 + j,
                                            0, 0, 0, 0, 0, 0, 0, 0);
      const __m512i lo = _mm512_permutex2var_epi32(z[0], idx, z[1]),
                    hi = _mm512_permutex2var_epi32(z[2], idx, z[3]);
      out[j] = _mm512_shuffle_i64x2(lo, hi, 0x44);
    }
  }
};

template <class Block>
void few_tokens(int64_t k, const std::byte* w_data, size_t w_stride, int64_t rows,
                const std::byte* a_data, size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQKK;
  const int64_t groups = (nb + kChains - 1) / kChains;
  thread_local FewTokens prepared;
  prepare_few_tokens(a_data, a_stride, tokens, nb, kHasMins<Block>, prepared);
  // Pointers, not the thread_local `prepared`: in the parallel region that name would be the
  // worker threads' own (empty) one.
  const float* a_scales = prepared.d.data();
  const int32_t* a_bsums = prepared.bsums.data();
  parallel_for(rows, [&](int64_t r) {
    const auto* w = reinterpret_cast<const Block*>(w_data + r * w_stride);
    __m512 chains[kMaxFewTokens];
    for (int64_t t = 0; t < tokens; ++t) chains[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t b0 = g * kChains;
      const int n = static_cast<int>(std::min<int64_t>(kChains, nb - b0));
      // [token][pair]: the folded lanes of super-blocks b0 + 2p, b0 + 2p + 1 (pairs past n: 0).
      alignas(64) __m512i s1[kMaxFewTokens][kChains / 2];
      GroupScales ws;
      ws.clear_from(n);
      for (int p = 0; 2 * p < n; ++p) {
        UnpackedSuperblock u[2];
        const bool both = 2 * p + 1 < n;
        for (int h = 0; h < 1 + both; ++h) {
          const int i = 2 * p + h;
          const Block& wb = w[b0 + i];
          prefetch_ahead(&wb, sizeof(Block));
          __m128i mins;
          unpack(wb, u[h], mins);
          ws.d[i] = wb.d;
          if constexpr (kHasMins<Block>) {
            ws.dmin[i] = wb.dmin;
            _mm_store_si128(reinterpret_cast<__m128i*>(ws.mins[i]), mins);
          }
        }
        const auto* a0 = reinterpret_cast<const BlockQ8_K*>(a_data) + b0 + 2 * p;
        if (both) {
          for (int64_t t = 0; t < tokens; ++t) {
            const auto* a = reinterpret_cast<const BlockQ8_K*>(
                reinterpret_cast<const std::byte*>(a0) + t * a_stride);
            s1[t][p] =
                fold_pair(superblock_ints<Block>(u[0], a[0]), superblock_ints<Block>(u[1], a[1]));
          }
        } else {
          for (int64_t t = 0; t < tokens; ++t) {
            const auto* a = reinterpret_cast<const BlockQ8_K*>(
                reinterpret_cast<const std::byte*>(a0) + t * a_stride);
            s1[t][p] = fold_pair(superblock_ints<Block>(u[0], a[0]), _mm512_setzero_si512());
          }
        }
      }
      // The group's super-blocks join their chains, token by token, as in the GEMV.
      const auto live = static_cast<__mmask16>((1u << n) - 1);
      const __m512 w_d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(ws.d)));
      const __m512 w_dmin =
          _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(ws.dmin)));
      __m512i mins[4];
      if constexpr (kHasMins<Block>) ws.load_mins(mins);
      // Up to 8 super-blocks (rows of 2048 and less) through the smaller tree.
      const int pairs = (n + 1) / 2, tree_pairs = pairs <= 4 ? 4 : 8;
      for (int64_t t = 0; t < tokens; ++t) {
        for (int p = pairs; p < tree_pairs; ++p) s1[t][p] = _mm512_setzero_si512();
        const __m512 a_d = _mm512_loadu_ps(a_scales + (t * groups + g) * kChains);
        const __m512 sums1 =
            _mm512_cvtepi32_ps(tree_pairs == 4 ? block_sums8(s1[t]) : block_sums16(s1[t]));
        chains[t] = _mm512_mask3_fmadd_ps(sums1, _mm512_mul_ps(w_d, a_d), chains[t], live);
        if constexpr (kHasMins<Block>) {
          const int32_t* bsums = a_bsums + (t * groups + g) * 4 * kChains;
          __m512i s2 =
              _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(bsums), mins[0]);
          for (int j = 1; j < 4; ++j)
            s2 = _mm512_dpwssd_epi32(s2, _mm512_loadu_si512(bsums + j * kChains), mins[j]);
          chains[t] = _mm512_mask3_fnmadd_ps(_mm512_cvtepi32_ps(s2), _mm512_mul_ps(w_dmin, a_d),
                                             chains[t], live);
        }
      }
    }
    for (int64_t t = 0; t < tokens; ++t) y[t * ldy + r] = sum_chains(chains[t]);
  });
}

}  // namespace

template <class Block>
void amx_gemm_k_few_tokens(int64_t k, const std::byte* w_data, size_t w_stride, int64_t rows,
                           const std::byte* a_data, size_t a_stride, int64_t tokens, float* y,
                           size_t ldy) {
  few_tokens<Block>(k, w_data, w_stride, rows, a_data, a_stride, tokens, y, ldy);
}
template void amx_gemm_k_few_tokens<BlockQ4_K>(int64_t, const std::byte*, size_t, int64_t,
                                               const std::byte*, size_t, int64_t, float*, size_t);
template void amx_gemm_k_few_tokens<BlockQ5_K>(int64_t, const std::byte*, size_t, int64_t,
                                               const std::byte*, size_t, int64_t, float*, size_t);
template void amx_gemm_k_few_tokens<BlockQ6_K>(int64_t, const std::byte*, size_t, int64_t,
                                               const std::byte*, size_t, int64_t, float*, size_t);

}  // namespace tern::cpu
