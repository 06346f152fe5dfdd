// The AMX level's kernels for Q4_K, Q5_K and Q6_K weights (Q8_K activations): a GEMM on
// AMX-INT8 tiles and the GEMV (AVX-512 VNNI) that computes exactly what it computes.
//
// Each output element is defined by exact integers per super-block b (256 elements) first:
//   Q4_K / Q5_K: S1_b = Σ_e sc_j(e) · q_e · a_e   (6-bit scale of e's 32-element sub-block j)
//                S2_b = Σ_j m_j · (bsum_2j + bsum_2j+1)   (6-bit mins, Q8_K's 16-element sums)
//                |S1| ≤ 8 · 63 · 31 · 128 · 32 < 2^31, |S2| ≤ 8 · 63 · 4096 < 2^22
//   Q6_K:        S_b  = Σ_e sc_s(e) · (q_e - 32) · a_e  (int8 scale of 16-element sub-block s)
//                |S| ≤ 256 · 4096 · 128 = 2^27
// then float chains (j = 0..15, from +0), the super-blocks b ≡ j (mod 16) in ascending order:
//   Q4_K / Q5_K: chain_j = fma(S1_b, f16(d) · a.d, chain_j); chain_j = fnmadd(S2_b, f16(dmin) · a.d, chain_j)
//   Q6_K:        chain_j = fma(S_b, f16(d) · a.d, chain_j)
// and y = the 16 chains summed in the fixed tree of amx_chains.h.
//
// The GEMV keeps the chains in the lanes of one register: per super-block the AVX-512 dot's
// exact int32 lanes, 16 super-blocks' lanes gathered into one register by block_sums16. The
// GEMM gets the same integers from AMX: the weight w_e = sc · q (Q4_K, Q5_K: 0..1953) or
// sc · (q - 32) (Q6_K: -4096..4096) does not fit int8, so it is split as w = 128 · hi + lo
// with lo = w & 127 and hi = w >> 7 (both int8), and S1 = 128 · Σ hi · a + Σ lo · a, each sum
// one AMX tile product over the super-block (exact int32). S2 is a 16 × 8 by 8 × 16 product
// of small integers, done with VNNI in the epilogue.
//
// GCC 12's AVX-512 intrinsics fill "undefined" operands with self-initialized variables that
// -Wuninitialized reports wherever they are inlined (GCC bug 105593, fixed in 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tern/kernels/cpu/amx_chains.h"
#include "tern/kernels/cpu/quant_blocks.h"
#include "tern/kernels/cpu/simd_common.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

constexpr int kChains = 16;  // = lanes of a register = rows and tokens of a tile
constexpr int kChunk = 64;   // elements per AMX tile product (a tile row of 64 int8)
constexpr int kChunks = kQKK / kChunk;

inline float f16(uint16_t h) { return _cvtsh_ss(h); }

// int16 index vector: lanes 0-15 = lo, lanes 16-31 = hi.
inline __m512i halves16(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(lo)), _mm256_set1_epi16(static_cast<int16_t>(hi)),
                            1);
}
// `pshufb` control for one int16 lane: byte `b` zero-extended.
constexpr int16_t zx(int b) { return static_cast<int16_t>(0x8000 | b); }

template <class Block>
constexpr bool kHasMins = !std::is_same_v<Block, BlockQ6_K>;

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
  const __m256i mins_dup = _mm256_setr_epi16(zx(8), zx(8), zx(9), zx(9), zx(10), zx(10), zx(11), zx(11),  //
                                             zx(12), zx(12), zx(13), zx(13), zx(14), zx(14), zx(15), zx(15));
  const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  s2 = _mm256_madd_epi16(bsums, _mm256_shuffle_epi8(_mm512_castsi512_si256(sc_m), mins_dup));
  __m512i qh;
  if constexpr (kHighBit) qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh)));
  __m512i sum = _mm512_setzero_si512();
  for (int j = 0; j < 4; ++j) {
    const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * j)));
    __m512i q = _mm512_and_si512(_mm512_srlv_epi16(bits, nibble_shift), low4);
    if constexpr (kHighBit) {
      // Bit s of qh[l] is the fifth bit of element l of sub-block s.
      const __mmask64 high =
          _mm512_test_epi8_mask(qh, _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * j))),
                                                       _mm256_set1_epi8(static_cast<char>(1 << (2 * j + 1))), 1));
      q = _mm512_mask_add_epi8(q, high, q, _mm512_set1_epi8(0x10));
    }
    // q · a pairs fit int16 (≤ 2 · 31 · 128); scaled and summed in int32 by VNNI.
    const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(a.qs + 64 * j));
    sum = _mm512_dpwssd_epi32(sum, p, _mm512_shuffle_epi8(sc_m, halves16(zx(2 * j), zx(2 * j + 1))));
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
  const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales)));
  const __m512i sc = _mm512_zextsi256_si512(sc16);
  const __m512i neg32_sc =
      _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5)));
  const __m512i bsums = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)));
  __m512i sum = _mm512_dpwssd_epi32(_mm512_setzero_si512(), bsums, neg32_sc);
  for (int half = 0; half < 2; ++half) {
    const __m512i ql = _mm512_loadu_si512(w.ql + 64 * half);
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh + 32 * half)));
    const __m512i qa =
        _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_sllv_epi16(qh, shift_a), bits45));
    const __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                       _mm512_and_si512(_mm512_srlv_epi16(qh, shift_b), bits45));
    // Each 128-bit lane of a `maddubs` result is one 16-element sub-block: its scale.
    const __m512i idx_a = _mm512_setr_epi64(0, 0, 0x0001000100010001, 0x0001000100010001, 0x0002000200020002,
                                            0x0002000200020002, 0x0003000300030003, 0x0003000300030003);
    const __m512i base = _mm512_set1_epi16(static_cast<int16_t>(8 * half));
    const __m512i sa = _mm512_permutexvar_epi16(_mm512_add_epi16(idx_a, base), sc);
    const __m512i sb = _mm512_permutexvar_epi16(_mm512_add_epi16(idx_a, _mm512_add_epi16(base, _mm512_set1_epi16(4))), sc);
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
    const __m512i g = _mm512_add_epi32(_mm512_shuffle_i32x4(f, f, 0x88), _mm512_shuffle_i32x4(f, f, 0xDD));
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 0, 0, 0, 0, 0, 0, 0, 0), g);
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
      h = _mm512_zextsi256_si512(
          _mm256_setr_epi32(bits(0), bits(1), bits(2), bits(3), bits(4), bits(5), bits(6), bits(7)));
      a_d = _mm512_zextps256_ps512(_mm256_setr_ps(a_d_of(0), a_d_of(1), a_d_of(2), a_d_of(3), a_d_of(4), a_d_of(5),
                                                  a_d_of(6), a_d_of(7)));
    } else {
      h = _mm512_setr_epi32(bits(0), bits(1), bits(2), bits(3), bits(4), bits(5), bits(6), bits(7), bits(8), bits(9),
                            bits(10), bits(11), bits(12), bits(13), bits(14), bits(15));
      a_d = _mm512_setr_ps(a_d_of(0), a_d_of(1), a_d_of(2), a_d_of(3), a_d_of(4), a_d_of(5), a_d_of(6), a_d_of(7),
                           a_d_of(8), a_d_of(9), a_d_of(10), a_d_of(11), a_d_of(12), a_d_of(13), a_d_of(14),
                           a_d_of(15));
    }
    d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)), a_d);
    if constexpr (kHasMins<Block>) dmin = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16))), a_d);
    return;
  }
  const auto live = static_cast<__mmask16>((1u << n) - 1);
  const __m512 a_d = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live,
                                              _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                                                   12, 13, 14, 15),
                                                                 _mm512_set1_epi32(sizeof(BlockQ8_K))),
                                              &a->d, 1);
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
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
    return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(v), _mm512_setzero_si512(), kChains - kLane));
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
    if constexpr (kHasMins<Block>) s2[p] = _mm512_inserti64x4(_mm512_castsi256_si512(m[0]), m[1], 1);
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


// Q4_K and Q5_K with every group inlined (measured ~8% faster); Q6_K so measured ~30% slower.
template <class Block>
__attribute__((flatten)) float vec_dot_flat(int64_t k, const void* w_row, const void* a_row) {
  return vec_dot<Block>(k, w_row, a_row);
}

// ---- the GEMM on AMX tiles -------------------------------------------------------------------
//
// Here the weights are the A operand (16 rows × 64 int8, row-major as unpacked) and the
// activations the B operand (16 groups of 4 elements × 16 tokens × 4 int8), so a C tile is
// 16 rows × 16 tokens and the epilogue works on the 16 tokens of one row per register.
//
// Tile registers: 0, 1 = C lo, hi of token tile 0; 2, 3 = C lo, hi of token tile 1; 4, 5 = A
// (the weights' lo and hi bytes of one 64-element chunk); 6, 7 = B (each token tile's chunk).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void load_tile_config() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  // GCC 12 may drop the stores above as dead before _tile_loadconfig reads them (it does not
  // see the instruction read memory): make them visible to it.
  __asm__ volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}

// Up to 16 weight rows laid out for the tiles, missing rows 0:
//   q    [nb][4 chunks][lo, hi][16 rows][64 int8]   (one A tile per chunk and part)
//   d    [nb][16 rows] f16(d) as float; dmin likewise (Q4_K, Q5_K)
//   mins [nb][16 rows][4] the mins as int16 pairs (m_2i, m_2i+1) (Q4_K, Q5_K)
struct UnpackedWeights {
  std::vector<int8_t> q;
  std::vector<float> d, dmin;
  std::vector<int32_t> mins;
  void resize(int64_t nb) {
    q.resize(static_cast<size_t>(nb * kChunks * 2 * kChains * kChunk));
    d.resize(static_cast<size_t>(nb * kChains));
    dmin.resize(static_cast<size_t>(nb * kChains));
    mins.resize(static_cast<size_t>(nb * kChains * 4));
  }
};

// 32 weights w (int16) as lo = w & 127 and hi = w >> 7, 32 int8 each.
inline void store_split(__m512i w, int8_t* lo, int8_t* hi) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo), _mm512_cvtepi16_epi8(_mm512_and_si512(w, _mm512_set1_epi16(127))));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi), _mm512_cvtepi16_epi8(_mm512_srai_epi16(w, 7)));
}

// Chunk c of the super-block in q[c][part][row]: lo at q + c * 2048, hi at + 1024.
constexpr size_t kPartBytes = kChains * kChunk;

template <class Block>
void unpack_superblock(const Block& w, int8_t* q, float* d, float* dmin, int32_t* mins) {
  *d = f16(w.d);
  if constexpr (kHasMins<Block>) {
    *dmin = f16(w.dmin);
    alignas(16) uint8_t sm[16];  // scales 0-7, mins 8-15
    _mm_store_si128(reinterpret_cast<__m128i*>(sm), unpack_scales_mins(w.scales));
    for (int i = 0; i < 4; ++i) mins[i] = sm[8 + 2 * i] | sm[9 + 2 * i] << 16;
    __m256i qh;
    if constexpr (std::is_same_v<Block, BlockQ5_K>) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh));
    for (int c = 0; c < kChunks; ++c) {
      // Elements 64c..64c+31 are the low nibbles of qs[32c..], 64c+32.. the high ones.
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * c));
      __m256i lo4 = _mm256_and_si256(bits, _mm256_set1_epi8(0x0f));
      __m256i hi4 = _mm256_and_si256(_mm256_srli_epi16(bits, 4), _mm256_set1_epi8(0x0f));
      if constexpr (std::is_same_v<Block, BlockQ5_K>) {
        // Bit s of qh[l] is the fifth bit of element l of sub-block s.
        const __m256i one = _mm256_set1_epi8(1);
        lo4 = _mm256_or_si256(lo4, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
        hi4 = _mm256_or_si256(hi4, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
      }
      int8_t* lo = q + c * 2 * kPartBytes;
      int8_t* hi = lo + kPartBytes;
      store_split(_mm512_mullo_epi16(_mm512_cvtepu8_epi16(lo4), _mm512_set1_epi16(sm[2 * c])), lo, hi);
      store_split(_mm512_mullo_epi16(_mm512_cvtepu8_epi16(hi4), _mm512_set1_epi16(sm[2 * c + 1])), lo + 32, hi + 32);
    }
  } else {
    const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
    const __m512i shift_a = halves16(4, 2), shift_b = halves16(0, 2);
    for (int half = 0; half < 2; ++half) {
      const __m512i ql = _mm512_loadu_si512(w.ql + 64 * half);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh + 32 * half)));
      // Chunks 2 half and 2 half + 1, 64 quants 0..63 each, as in the GEMV.
      const __m512i chunk[2] = {
          _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_sllv_epi16(qh, shift_a), bits45)),
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                          _mm512_and_si512(_mm512_srlv_epi16(qh, shift_b), bits45))};
      for (int h = 0; h < 2; ++h) {
        const int c = 2 * half + h;
        int8_t* lo = q + c * 2 * kPartBytes;
        int8_t* hi = lo + kPartBytes;
        for (int part = 0; part < 2; ++part) {  // 32 elements: sub-blocks 4c + 2 part, + 1
          const __m512i q16 = _mm512_sub_epi16(
              _mm512_cvtepu8_epi16(part == 0 ? _mm512_castsi512_si256(chunk[h]) : _mm512_extracti64x4_epi64(chunk[h], 1)),
              _mm512_set1_epi16(32));
          const __m512i sc = halves16(w.scales[4 * c + 2 * part], w.scales[4 * c + 2 * part + 1]);
          store_split(_mm512_mullo_epi16(q16, sc), lo + 32 * part, hi + 32 * part);
        }
      }
    }
  }
}

template <class Block>
void unpack_weights(const std::byte* w_data, size_t w_stride, int rows, int64_t nb, UnpackedWeights& out) {
  if (rows < kChains) {
    std::fill(out.q.begin(), out.q.end(), int8_t{0});
    std::fill(out.d.begin(), out.d.end(), 0.0f);
    std::fill(out.dmin.begin(), out.dmin.end(), 0.0f);
    std::fill(out.mins.begin(), out.mins.end(), 0);
  }
  for (int r = 0; r < rows; ++r) {
    const auto* w = reinterpret_cast<const Block*>(w_data + r * w_stride);
    for (int64_t b = 0; b < nb; ++b)
      unpack_superblock(w[b], out.q.data() + b * kChunks * 2 * kPartBytes + r * kChunk, &out.d[b * kChains + r],
                        &out.dmin[b * kChains + r], &out.mins[(b * kChains + r) * 4]);
  }
}

// The activations as B tiles and their scales, per token tile of 16 (missing tokens 0):
//   q     [tiles][nb][4 chunks][16 groups][16 tokens][4 int8]
//   d     [tiles][nb][16 tokens]
//   bsums [tiles][nb][4][16 tokens] the 32-element sums as int16 pairs (Q4_K, Q5_K)
struct PackedActivations {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> bsums;
};

void pack_activations(const std::byte* a_data, size_t a_stride, int64_t tokens, int64_t nb, bool with_bsums,
                      PackedActivations& out) {
  const int64_t tiles = (tokens + kChains - 1) / kChains;
  out.q.resize(static_cast<size_t>(tiles * nb * kQKK * kChains));
  out.d.resize(static_cast<size_t>(tiles * nb * kChains));
  out.bsums.resize(with_bsums ? static_cast<size_t>(tiles * nb * 4 * kChains) : 0);
  if (tokens % kChains != 0) {  // the last tile's missing tokens
    std::fill(out.q.end() - nb * kQKK * kChains, out.q.end(), int8_t{0});
    std::fill(out.d.end() - nb * kChains, out.d.end(), 0.0f);
    if (with_bsums) std::fill(out.bsums.end() - nb * 4 * kChains, out.bsums.end(), 0);
  }
  int8_t* q = out.q.data();
  float* d = out.d.data();
  int32_t* bsums = out.bsums.data();
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(a_data + t * a_stride);
    const int64_t tile = t / kChains, lane = t % kChains;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t sb = tile * nb + b;
      auto* dst = reinterpret_cast<int32_t*>(q + sb * kQKK * kChains) + lane;
      for (int g = 0; g < kQKK / 4; ++g) std::memcpy(dst + g * kChains, a[b].qs + 4 * g, 4);
      d[sb * kChains + lane] = a[b].d;
      if (with_bsums) {
        for (int i = 0; i < 4; ++i) {
          const int lo = a[b].bsums[4 * i] + a[b].bsums[4 * i + 1], hi = a[b].bsums[4 * i + 2] + a[b].bsums[4 * i + 3];
          bsums[(sb * 4 + i) * kChains + lane] = static_cast<int32_t>(static_cast<uint16_t>(lo) | static_cast<uint32_t>(hi) << 16);
        }
      }
    }
  }
}

// One token tile's activations, from its first super-block on.
struct TokenTile {
  const int8_t* q;
  const float* d;
  const int32_t* bsums;
  int tokens;
};

// Super-block b of kTiles (1 or 2) token tiles into C tiles 0-1 (and 2-3): the weights' A
// tiles loaded once for both.
template <int kTiles>
inline void multiply_superblock(const int8_t* wq, const TokenTile* a, int64_t b) {
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kTiles == 2) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int c = 0; c < kChunks; ++c) {
    const int8_t* w = wq + (b * kChunks + c) * 2 * kPartBytes;
    _tile_loadd(4, w, kChunk);
    _tile_loadd(5, w + kPartBytes, kChunk);
    _tile_loadd(6, a[0].q + (b * kChunks + c) * kPartBytes, kChunk);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 5, 6);
    if constexpr (kTiles == 2) {
      _tile_loadd(7, a[1].q + (b * kChunks + c) * kPartBytes, kChunk);
      _tile_dpbssd(2, 4, 7);
      _tile_dpbssd(3, 5, 7);
    }
  }
}
// c: [tile][lo, hi][16 rows × 16 tokens]
template <int kTiles>
inline void store_superblock(int32_t (*c)[2][kChains * kChains]) {
  _tile_stored(0, c[0][0], kChains * 4);
  _tile_stored(1, c[0][1], kChains * 4);
  if constexpr (kTiles == 2) {
    _tile_stored(2, c[1][0], kChains * 4);
    _tile_stored(3, c[1][1], kChains * 4);
  }
}

// Super-block b's sums of one token tile join their chains: per row, the 16 tokens at once.
template <class Block>
inline void join_chains(const int32_t (*c)[kChains * kChains], const UnpackedWeights& w, const TokenTile& a, int64_t b,
                        __m512* chain) {
  const __m512 a_d = _mm512_loadu_ps(a.d + b * kChains);
  __m512i bsums[4];
  if constexpr (kHasMins<Block>)
    for (int i = 0; i < 4; ++i) bsums[i] = _mm512_loadu_si512(a.bsums + (b * 4 + i) * kChains);
  for (int r = 0; r < kChains; ++r) {
    const __m512i s1 = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c[1] + r * kChains), 7),
                                        _mm512_load_si512(c[0] + r * kChains));
    const __m512 d = _mm512_mul_ps(_mm512_set1_ps(w.d[b * kChains + r]), a_d);
    // A chain's first super-block adds to +0, as the GEMV's lanes start (no zeroed chains to load).
    __m512 acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), d, b < kChains ? _mm512_setzero_ps() : chain[r]);
    if constexpr (kHasMins<Block>) {
      const int32_t* m = &w.mins[(b * kChains + r) * 4];
      __m512i s2 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), bsums[0], _mm512_set1_epi32(m[0]));
      for (int i = 1; i < 4; ++i) s2 = _mm512_dpwssd_epi32(s2, bsums[i], _mm512_set1_epi32(m[i]));
      const __m512 dmin = _mm512_mul_ps(_mm512_set1_ps(w.dmin[b * kChains + r]), a_d);
      acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(s2), dmin, acc);
    }
    chain[r] = acc;
  }
}

// The 16 × 16 floats of r transposed (r[i] lane j → out[j] lane i): 4 rounds of 16 shuffles.
inline void transpose16(const __m512* r, __m512* out) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: a0 b0 a1 b1 / a2 b2 a3 b3
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // u[4i + j], 128-bit lane L: column 4L + j of rows 4i..4i+3
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    // 128-bit lanes 0 and 2 (0x88) or 1 and 3 (0xDD) of rows 0-7 and of rows 8-15 …
    const __m512 even_lo = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
    const __m512 even_hi = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 odd_lo = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
    const __m512 odd_hi = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    // … give columns j, 8 + j (from lanes 0, 2) and 4 + j, 12 + j (lanes 1, 3).
    out[j] = _mm512_shuffle_f32x4(even_lo, even_hi, 0x88);
    out[8 + j] = _mm512_shuffle_f32x4(even_lo, even_hi, 0xDD);
    out[4 + j] = _mm512_shuffle_f32x4(odd_lo, odd_hi, 0x88);
    out[12 + j] = _mm512_shuffle_f32x4(odd_lo, odd_hi, 0xDD);
  }
}

// The chains' tree on a row's 16 tokens at once (chains no super-block reached, j ≥ nb, are
// +0 as in the GEMV); then the tile into y, token-major.
void finish_tile(__m512* chains, int64_t nb, float* y, size_t ldy, int rows, int tokens) {
  for (int width = kChains / 2; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j) {
      for (int r = 0; r < kChains; ++r) {
        // After the first level every chain read has been written.
        const bool first = width == kChains / 2;
        const __m512 x = first && j >= nb ? _mm512_setzero_ps() : chains[j * kChains + r];
        const __m512 z = first && j + width >= nb ? _mm512_setzero_ps() : chains[(j + width) * kChains + r];
        chains[j * kChains + r] = _mm512_add_ps(x, z);
      }
    }
  }
  __m512 by_token[kChains];
  transpose16(chains, by_token);
  const auto live = static_cast<__mmask16>((1u << rows) - 1);
  for (int t = 0; t < tokens; ++t) _mm512_mask_storeu_ps(y + t * ldy, live, by_token[t]);
}

// kTiles (1 or 2) output tiles of 16 rows × 16 tokens that share their rows. The tiles of
// super-block b + 1 are issued before super-block b's sums join their chains, so the tile
// unit works while the vector unit does.
template <class Block, int kTiles>
void output_tiles(const UnpackedWeights& w, const TokenTile* a, int64_t nb, float* y, size_t ldy, int rows) {
  // Per tile [16 chains][16 rows] of 16 tokens: 16 KiB, in L1; no need to zero (join_chains).
  thread_local __m512 chains[2][kChains * kChains];
  // [stage][tile][lo, hi]: the int32 sums of one super-block.
  alignas(64) int32_t c[2][2][2][kChains * kChains];
  multiply_superblock<kTiles>(w.q.data(), a, 0);
  store_superblock<kTiles>(c[0]);
  for (int64_t b = 0; b < nb; ++b) {
    if (b + 1 < nb) multiply_superblock<kTiles>(w.q.data(), a, b + 1);
    for (int i = 0; i < kTiles; ++i) join_chains<Block>(c[b % 2][i], w, a[i], b, chains[i] + (b % kChains) * kChains);
    if (b + 1 < nb) store_superblock<kTiles>(c[(b + 1) % 2]);
  }
  for (int i = 0; i < kTiles; ++i) finish_tile(chains[i], nb, y + i * kChains * ldy, ldy, rows, a[i].tokens);
}

// The GEMV the level's table holds for the type.
template <class Block>
constexpr VecDotFn kGemv = std::is_same_v<Block, BlockQ6_K> ? vec_dot<Block> : vec_dot_flat<Block>;

// Below this many tokens the GEMV per element, a weight row in L1 for all its tokens, beats
// unpacking the weights for the tiles (measured, 2048 x 2048: Q4_K at T = 4 ~2x faster, at
// T = 16 ~2x slower).
constexpr int64_t kMinTileTokens = 8;

template <class Block>
void gemm(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data, size_t a_stride,
          int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQKK;
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  if (tokens < kMinTileTokens) {
    const auto* abytes = static_cast<const std::byte*>(a_data);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t t = 0; t < tokens; ++t) y[t * ldy + r] = kGemv<Block>(k, wbytes + r * w_stride, abytes + t * a_stride);
    return;
  }
  thread_local PackedActivations packed;
  pack_activations(static_cast<const std::byte*>(a_data), a_stride, tokens, nb, kHasMins<Block>, packed);
  const int64_t token_tiles = (tokens + kChains - 1) / kChains;
  // Pointers, not the thread_local `packed`: in the parallel region that name would be the
  // worker threads' own (empty) one.
  const int8_t* qs = packed.q.data();
  const float* scales = packed.d.data();
  const int32_t* bsums = packed.bsums.data();
  auto token_tile = [=](int64_t tt) {
    return TokenTile{qs + tt * nb * kQKK * kChains, scales + tt * nb * kChains,
                     kHasMins<Block> ? bsums + tt * nb * 4 * kChains : nullptr,
                     static_cast<int>(std::min<int64_t>(kChains, tokens - tt * kChains))};
  };
  const int64_t row_tiles = (rows + kChains - 1) / kChains;
#pragma omp parallel
  {
    load_tile_config();
    UnpackedWeights w;
    w.resize(nb);
    // A thread lays out its rows once and takes every token tile past them.
#pragma omp for schedule(static)
    for (int64_t rt = 0; rt < row_tiles; ++rt) {
      const int n = static_cast<int>(std::min<int64_t>(kChains, rows - rt * kChains));
      unpack_weights<Block>(wbytes + rt * kChains * w_stride, w_stride, n, nb, w);
      for (int64_t tt = 0; tt < token_tiles; tt += 2) {
        const TokenTile a[2] = {token_tile(tt), token_tile(std::min(tt + 1, token_tiles - 1))};
        auto* tile = tt + 1 < token_tiles ? output_tiles<Block, 2> : output_tiles<Block, 1>;
        tile(w, a, nb, y + tt * kChains * ldy + rt * kChains, ldy, n);
      }
    }
    _tile_release();
  }
}

}  // namespace

VecDotFn amx_vec_dot_k(DType weight) {
  switch (weight) {
    case DType::Q4_K: return vec_dot_flat<BlockQ4_K>;
    case DType::Q5_K: return vec_dot_flat<BlockQ5_K>;
    case DType::Q6_K: return vec_dot<BlockQ6_K>;
    default: return nullptr;
  }
}

GemmTileFn amx_gemm_k(DType weight) {
  switch (weight) {
    case DType::Q4_K: return gemm<BlockQ4_K>;
    case DType::Q5_K: return gemm<BlockQ5_K>;
    case DType::Q6_K: return gemm<BlockQ6_K>;
    default: return nullptr;
  }
}

}  // namespace tern::cpu
