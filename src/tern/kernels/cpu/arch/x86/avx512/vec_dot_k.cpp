// The AVX-512 levels' arithmetic for Q4_K, Q5_K and Q6_K weights (Q8_K activations) and its GEMV
// (VNNI) on the file's rows; the packed matmuls (matmul_k_packed.cpp, matmul_q6_k_packed.cpp)
// and the Amx level's GEMM on AMX-INT8 tiles (amx/gemm_k.cpp) compute exactly what it computes.
//
// Each output element is defined by exact integers per super-block b (256 elements) first:
//   Q4_K / Q5_K: S1_b = Σ_e sc_j(e) · q_e · a_e   (6-bit scale of e's 32-element sub-block j)
//                S2_b = Σ_j m_j · (bsum_2j + bsum_2j+1)   (6-bit mins, Q8_K's 16-element sums)
//                |S1| ≤ 8 · 63 · 31 · 128 · 32 < 2^31, |S2| ≤ 8 · 63 · 4096 < 2^22
//   Q6_K:        S_b  = Σ_e sc_s(e) · (q_e - 32) · a_e  (int8 scale of 16-element sub-block s)
//                |S| ≤ 256 · 4096 · 128 = 2^27
// then float chains (j = 0..15, from +0), the super-blocks b ≡ j (mod 16) in ascending order:
//   Q4_K / Q5_K: chain_j = fma(S1_b, f16(d) · a.d, chain_j); chain_j = fnmadd(S2_b, f16(dmin) ·
//   a.d, chain_j) Q6_K:        chain_j = fma(S_b, f16(d) · a.d, chain_j)
// and y = the 16 chains summed in the fixed tree of avx512/chains.h.
//
// The GEMV (here) keeps the chains in the lanes of one register: per super-block the AVX-512
// dot's exact int32 lanes, 16 super-blocks' lanes gathered into one register by block_sums16.
// The GEMM (amx/gemm_k.cpp) gets the same integers from AMX: the weight w_e = sc · q (Q4_K,
// Q5_K: 0..1953) or sc · (q - 32) (Q6_K: -4096..4096) does not fit int8, so it is split as
// w = 128 · hi + lo with lo = w & 127 and hi = w >> 7 (both int8), and S1 = 128 · Σ hi · a +
// Σ lo · a, each sum one AMX tile product over the super-block (exact int32). S2 is a 16 × 8
// by 8 × 16 product of small integers, done with VNNI in the epilogue.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512/chains.h"
#include "tern/kernels/cpu/arch/x86/avx512/k_common.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// ---- the GEMV --------------------------------------------------------------------------------

// One Q4_K / Q5_K super-block: 16 int32 lanes summing to S1 and 8 summing to S2.
template <class Block>
inline void superblock_ints(const Block& w, const BlockQ8_K& a, __m512i& s1, __m256i& s2) {
  constexpr bool kHighBit = std::is_same_v<Block, BlockQ5_K>;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  // A 32-byte chunk of qs in both halves: low nibbles (sub-block 2j) below, high ones
  // (sub-block 2j + 1) above, matching 64 contiguous activations.
  const __m512i nibble_shift = halves16(0, 4);
  const __m512i sc_m = _mm512_broadcast_i32x4(unpack_scales_mins(w.scales));
  // [m0, m0, m1, m1, …]: one min per pair of 16-element bsums.
  const __m256i mins_dup =
      _mm256_setr_epi16(zx(8), zx(8), zx(9), zx(9), zx(10), zx(10), zx(11), zx(11),  //
                        zx(12), zx(12), zx(13), zx(13), zx(14), zx(14), zx(15), zx(15));
  const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  s2 = _mm256_madd_epi16(bsums, _mm256_shuffle_epi8(_mm512_castsi512_si256(sc_m), mins_dup));
  __m512i qh;
  if constexpr (kHighBit)
    qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh)));
  __m512i sum = _mm512_setzero_si512();
  for (int j = 0; j < 4; ++j) {
    const __m512i bits =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * j)));
    __m512i q = _mm512_and_si512(_mm512_srlv_epi16(bits, nibble_shift), low4);
    if constexpr (kHighBit) {
      // Bit s of qh[l] is the fifth bit of element l of sub-block s.
      const __mmask64 high = _mm512_test_epi8_mask(
          qh, _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * j))),
                                 _mm256_set1_epi8(static_cast<char>(1 << (2 * j + 1))), 1));
      q = _mm512_mask_add_epi8(q, high, q, _mm512_set1_epi8(0x10));
    }
    // q · a pairs fit int16 (≤ 2 · 31 · 128); scaled and summed in int32 by VNNI.
    const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(a.qs + 64 * j));
    sum =
        _mm512_dpwssd_epi32(sum, p, _mm512_shuffle_epi8(sc_m, halves16(zx(2 * j), zx(2 * j + 1))));
  }
  s1 = sum;
}

// One Q6_K super-block: 16 int32 lanes summing to S. The quants stay unsigned (0..63) for
// `maddubs`; the -32 offset is -32 · Σ sc · bsum, folded into the same lanes.
inline void superblock_ints(const BlockQ6_K& w, const BlockQ8_K& a, __m512i& s, __m256i&) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  // Per 128 elements, qh[l] holds the top bits of elements l, l+32, l+64, l+96 in bit pairs
  // 0-1, 2-3, 4-5, 6-7: register A (elements 0-63) shifts pairs 0-1 / 2-3 of its halves up
  // to bits 4-5, register B (64-127) pairs 4-5 / 6-7.
  const __m512i shift_a = halves16(4, 2), shift_b = halves16(0, 2);
  const __m256i sc16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales)));
  const __m512i sc = _mm512_zextsi256_si512(sc16);
  const __m512i neg32_sc =
      _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5)));
  const __m512i bsums =
      _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)));
  __m512i sum = _mm512_dpwssd_epi32(_mm512_setzero_si512(), bsums, neg32_sc);
  for (int half = 0; half < 2; ++half) {
    const __m512i ql = _mm512_loadu_si512(w.ql + 64 * half);
    const __m512i qh = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh + 32 * half)));
    const __m512i qa = _mm512_or_si512(_mm512_and_si512(ql, low4),
                                       _mm512_and_si512(_mm512_sllv_epi16(qh, shift_a), bits45));
    const __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                       _mm512_and_si512(_mm512_srlv_epi16(qh, shift_b), bits45));
    // Each 128-bit lane of a `maddubs` result is one 16-element sub-block: its scale.
    const __m512i idx_a =
        _mm512_setr_epi64(0, 0, 0x0001000100010001, 0x0001000100010001, 0x0002000200020002,
                          0x0002000200020002, 0x0003000300030003, 0x0003000300030003);
    const __m512i base = _mm512_set1_epi16(static_cast<int16_t>(8 * half));
    const __m512i sa = _mm512_permutexvar_epi16(_mm512_add_epi16(idx_a, base), sc);
    const __m512i sb = _mm512_permutexvar_epi16(
        _mm512_add_epi16(idx_a, _mm512_add_epi16(base, _mm512_set1_epi16(4))), sc);
    const int8_t* y = a.qs + 128 * half;
    sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(qa, _mm512_loadu_si512(y)), sa);
    sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(qb, _mm512_loadu_si512(y + 64)), sb);
  }
  s = sum;
}

// Two super-blocks' 16 lanes folded to 8 each: block x in lanes 0-7, block y in lanes 8-15.
inline __m512i fold_pair(__m512i x, __m512i y) {
  return _mm512_add_epi32(_mm512_shuffle_i64x2(x, y, 0x44), _mm512_shuffle_i64x2(x, y, 0xEE));
}

// The exact sums of 2 R super-blocks (R = 2, 4 or 8 registers as block_sums16 takes them), lane
// i = super-block i: block_sums16's steps, fewer of them for fewer registers.
template <int R>
inline __m512i block_sums(const __m512i* d) {
  if constexpr (R == 8) {
    return block_sums16(d);
  } else {
    auto add_unpacked32 = [](__m512i x, __m512i y) {
      return _mm512_add_epi32(_mm512_unpacklo_epi32(x, y), _mm512_unpackhi_epi32(x, y));
    };
    auto add_unpacked64 = [](__m512i x, __m512i y) {
      return _mm512_add_epi32(_mm512_unpacklo_epi64(x, y), _mm512_unpackhi_epi64(x, y));
    };
    const __m512i e0 = add_unpacked32(d[0], d[1]);
    // 128-bit lane q of f: [d0, d1, d2, d3]'s sums of their lane q (R = 2: [d0, d1, d0, d1]).
    __m512i f;
    if constexpr (R == 4) {
      f = add_unpacked64(e0, add_unpacked32(d[2], d[3]));
    } else {
      f = add_unpacked64(e0, e0);
    }
    // Lanes 0-3: blocks 0 2 4 6 (lanes q = 0, 1 summed), 4-7: 1 3 5 7 (q = 2, 3).
    const __m512i g =
        _mm512_add_epi32(_mm512_shuffle_i32x4(f, f, 0x88), _mm512_shuffle_i32x4(f, f, 0xDD));
    return _mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 0, 0, 0, 0, 0, 0, 0, 0), g);
  }
}

// f16(d) · a.d (and f16(dmin) · a.d) of the n ≤ 16 super-blocks from w, a in lanes 0..n-1: the
// same products as one at a time. Gathered for 16 (measured faster there), one at a time for
// fewer (faster there).
template <class Block, int R, bool kGather>
inline void superblock_scales(const Block* w, const BlockQ8_K* a, int n, __m512& d, __m512& dmin) {
  if constexpr (!kGather) {
    // Built in registers: stored one at a time and loaded as a vector, they stall the load
    // (no store forwarding; measured ~12% of a 4-super-block row).
    auto bits = [&](int i) -> int32_t {  // the f16 pair (d, dmin), or d (Q6_K)
      if (i >= n) return 0;
      int32_t v;
      if constexpr (kHasMins<Block>) {
        std::memcpy(&v, &w[i], 4);
      } else {
        v = w[i].d;
      }
      return v;
    };
    auto a_d_of = [&](int i) { return i < n ? a[i].d : 0.0f; };
    __m512i h;
    __m512 a_d;
    if constexpr (R == 2) {
      h = _mm512_zextsi128_si512(_mm_setr_epi32(bits(0), bits(1), bits(2), bits(3)));
      a_d = _mm512_zextps128_ps512(_mm_setr_ps(a_d_of(0), a_d_of(1), a_d_of(2), a_d_of(3)));
    } else if constexpr (R == 4) {
      h = _mm512_zextsi256_si512(_mm256_setr_epi32(bits(0), bits(1), bits(2), bits(3), bits(4),
                                                   bits(5), bits(6), bits(7)));
      a_d = _mm512_zextps256_ps512(_mm256_setr_ps(a_d_of(0), a_d_of(1), a_d_of(2), a_d_of(3),
                                                  a_d_of(4), a_d_of(5), a_d_of(6), a_d_of(7)));
    } else {
      h = _mm512_setr_epi32(bits(0), bits(1), bits(2), bits(3), bits(4), bits(5), bits(6), bits(7),
                            bits(8), bits(9), bits(10), bits(11), bits(12), bits(13), bits(14),
                            bits(15));
      a_d = _mm512_setr_ps(a_d_of(0), a_d_of(1), a_d_of(2), a_d_of(3), a_d_of(4), a_d_of(5),
                           a_d_of(6), a_d_of(7), a_d_of(8), a_d_of(9), a_d_of(10), a_d_of(11),
                           a_d_of(12), a_d_of(13), a_d_of(14), a_d_of(15));
    }
    d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)), a_d);
    if constexpr (kHasMins<Block>)
      dmin = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16))), a_d);
    return;
  }
  const auto live = static_cast<__mmask16>((1u << n) - 1);
  const __m512 a_d = _mm512_mask_i32gather_ps(
      _mm512_setzero_ps(), live,
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(sizeof(BlockQ8_K))),
      &a->d, 1);
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(sizeof(Block)));
  if constexpr (kHasMins<Block>) {
    // d and dmin are the block's first 4 bytes.
    const __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, w, 1);
    d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)), a_d);
    dmin = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16))), a_d);
  } else {
    // d is the block's last 2 bytes: read with the 2 before them.
    const auto* last4 = reinterpret_cast<const uint8_t*>(&w->d) - 2;
    const __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, last4, 1);
    d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16))), a_d);
  }
}

// n ≤ 2 R super-blocks from w, a into lanes 0..n-1 of the chains (kFull: n = 2 R).
// Lanes 0..15-kLane moved up to kLane..15, zeros below.
template <int kLane>
inline __m512 lanes_up(__m512 v) {
  if constexpr (kLane == 0) {
    return v;
  } else {
    return _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(v), _mm512_setzero_si512(), kChains - kLane));
  }
}

template <class Block, int R, bool kFull, int kLane = 0>
inline __m512 superblock_group(const Block* w, const BlockQ8_K* a, int n, __m512 chains) {
  // Folded pairs in memory, the loop not unrolled: unrolled, the constants of the loop body
  // were rebuilt per super-block for want of registers (measured ~10% slower).
  alignas(64) __m512i s1[R], s2[R];
  int p = 0;
#pragma GCC unroll 1
  for (; 2 * p + 1 < n; ++p) {
    __m512i x[2];
    __m256i m[2];
    for (int h = 0; h < 2; ++h) {
      prefetch_ahead(w + 2 * p + h, sizeof(Block));
      superblock_ints(w[2 * p + h], a[2 * p + h], x[h], m[h]);
    }
    s1[p] = fold_pair(x[0], x[1]);
    if constexpr (kHasMins<Block>)
      s2[p] = _mm512_inserti64x4(_mm512_castsi256_si512(m[0]), m[1], 1);
  }
  if (!kFull && 2 * p < n) {
    __m512i x;
    __m256i m;
    superblock_ints(w[2 * p], a[2 * p], x, m);
    s1[p] = fold_pair(x, _mm512_setzero_si512());
    if constexpr (kHasMins<Block>) s2[p] = _mm512_zextsi256_si512(m);
    ++p;
  }
  for (; !kFull && p < R; ++p) s1[p] = s2[p] = _mm512_setzero_si512();
  __m512 d, dmin;
  superblock_scales<Block, R, kFull && R == 8>(w, a, n, d, dmin);
  // The super-blocks' lanes from kLane on (a group of 4 after one of 8).
  const auto live = static_cast<__mmask16>(((1u << n) - 1) << kLane);
  __m512 sums1, sums2;
  if constexpr (kHasMins<Block> && R < 8) {
    // S1 and S2 of up to 8 super-blocks through one tree: S1 in lanes 0..2R-1, S2 above.
    __m512i both[2 * R];
    for (int i = 0; i < R; ++i) both[i] = s1[i], both[R + i] = s2[i];
    const __m512i sums = block_sums<2 * R>(both);
    sums1 = _mm512_cvtepi32_ps(sums);
    sums2 = _mm512_cvtepi32_ps(_mm512_alignr_epi32(_mm512_setzero_si512(), sums, 2 * R));
  } else {
    sums1 = _mm512_cvtepi32_ps(block_sums<R>(s1));
    if constexpr (kHasMins<Block>) sums2 = _mm512_cvtepi32_ps(block_sums<R>(s2));
  }
  chains = _mm512_mask3_fmadd_ps(lanes_up<kLane>(sums1), lanes_up<kLane>(d), chains, live);
  if constexpr (kHasMins<Block>)
    chains = _mm512_mask3_fnmadd_ps(lanes_up<kLane>(sums2), lanes_up<kLane>(dmin), chains, live);
  return chains;
}

template <class Block>
float vec_dot(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const Block*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  const int64_t nb = k / kQKK;
  __m512 chains = _mm512_setzero_ps();
  // Up to 16 super-blocks at a time, super-block b + i in lane (and chain) i.
  for (int64_t b = 0; b < nb; b += kChains) {
    const int n = static_cast<int>(std::min<int64_t>(kChains, nb - b));
    if (n == 16) {
      chains = superblock_group<Block, 8, true>(w + b, a + b, n, chains);
    } else if (n > 12) {
      chains = superblock_group<Block, 8, false>(w + b, a + b, n, chains);
    } else if (n > 8) {  // 8 and the rest in lanes 8-11: fewer zeros through the trees
      chains = superblock_group<Block, 4, true>(w + b, a + b, 8, chains);
      if (n == 12) {
        chains = superblock_group<Block, 2, true, 8>(w + b + 8, a + b + 8, 4, chains);
      } else {
        chains = superblock_group<Block, 2, false, 8>(w + b + 8, a + b + 8, n - 8, chains);
      }
    } else if (n == 8) {
      chains = superblock_group<Block, 4, true>(w + b, a + b, n, chains);
    } else if (n > 4) {
      chains = superblock_group<Block, 4, false>(w + b, a + b, n, chains);
    } else if (n == 4) {  // rows of 1024, the most common in small models
      chains = superblock_group<Block, 2, true>(w + b, a + b, n, chains);
    } else {
      chains = superblock_group<Block, 2, false>(w + b, a + b, n, chains);
    }
  }
  return sum_chains(chains);
}

// The GEMV with every group inlined: measured 3-8% faster on rows of 4-12 super-blocks.
template <class Block>
__attribute__((flatten)) float vec_dot_flat(int64_t k, const void* w_row, const void* a_row) {
  return vec_dot<Block>(k, w_row, a_row);
}

}  // namespace

VecDotFn chains16_vec_dot_k(DType weight) {
  switch (weight) {
    case DType::Q4_K:
      return vec_dot_flat<BlockQ4_K>;
    case DType::Q5_K:
      return vec_dot_flat<BlockQ5_K>;
    case DType::Q6_K:
      return vec_dot_flat<BlockQ6_K>;
    default:
      return nullptr;
  }
}

const PackedKernels* chains16_packed_k(DType weight) {
  switch (weight) {
    case DType::Q4_K:
      return chains16_packed_q4_k();
    case DType::Q5_K:
      return chains16_packed_q5_k();
    case DType::Q6_K:
      return chains16_packed_q6_k();
    default:
      return nullptr;
  }
}

GemmTileFn chains16_gemm_k(DType weight) {
  switch (weight) {
    case DType::Q4_K:
      return chains16_gemm_q4_k();
    case DType::Q5_K:
      return chains16_gemm_q5_k();
    case DType::Q6_K:
      return chains16_gemm_q6_k();
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
