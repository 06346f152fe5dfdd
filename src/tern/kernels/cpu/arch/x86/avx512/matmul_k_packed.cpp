// Q4_K's and Q5_K's matmuls on weights packed in groups of 16 rows (the driver is
// avx512/packed_matmul.h). The GEMV on the file's rows (avx512/vec_dot_k.cpp, where the
// arithmetic is defined) spends ~5 instructions per 64 products, a scale shuffle among them,
// and read 18 GiB/s per core from L2 where memory gave each of two cores ~14 (the Intel AMX
// machine): Qwen3 Q4_K_M decoded at ~76% of the bandwidth where Q4_0 reached 82-91%. Here,
// with 16 rows in the lanes, one vpdpbusd takes 64 products against a broadcast activation
// dword, and the scales multiply once per 32-element sub-block of 16 rows (33 GiB/s per core
// from L2).
//
// A group's super-block b (16 rows; kSuperblockBytes = 16 · sizeof(Block), the file's bytes
// reordered):
//   scales [3 words][16 rows][4 bytes]    word v: bytes 4v..4v+3 of the row's 12 scale bytes
//   d      [16 rows][4 bytes]             the row's (d, dmin) f16 pair
//   qs     [32 chunks][16 rows][4 bytes]  chunk c: bytes 4c..4c+3 of the row's qs, which hold
//                                         elements 64 (c / 8) + 4 (c % 8) .. +3 of sub-block
//                                         2 (c / 8) in their low nibbles, and the same elements
//                                         of sub-block 2 (c / 8) + 1 in their high ones
//   qh     [8 chunks][16 rows][4 bytes]   Q5_K: chunk c: bytes 4c..4c+3 of the row's qh, bit s
//                                         the fifth bit of the elements 4c..4c+3 of sub-block s
// The last group's missing rows are zero. The Avx512 level takes the VNNI dots below for every
// token count; the Amx level (Q4_K only) for up to 32 tokens, and beyond them the AMX GEMM
// (amx/gemm_k.cpp), which restores each tile's rows to the file's layout first.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512/chains.h"
#include "tern/kernels/cpu/arch/x86/avx512/k_common.h"
#include "tern/kernels/cpu/arch/x86/avx512/packed_matmul.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

constexpr int kRows = kGroupRows;
// A group's super-block: kSuperblockBytes<Block> = 16 · sizeof(Block), the file's bytes reordered.
constexpr int64_t kScalesAt = 0, kDAt = 3 * 64, kQsAt = kDAt + 64, kQhAt = kQsAt + 32 * 64;
template <class Block>
constexpr bool kHighBit = std::is_same_v<Block, BlockQ5_K>;
template <class Block>
constexpr int64_t kSuperblockBytes = kHighBit<Block> ? kQhAt + 8 * 64 : kQhAt;
static_assert(kSuperblockBytes<BlockQ4_K> == kRows * int64_t{sizeof(BlockQ4_K)});
static_assert(kSuperblockBytes<BlockQ5_K> == kRows * int64_t{sizeof(BlockQ5_K)});

// Rows [0, n) of a group from the file's layout; rows n..15 zero.
template <class Block>
void pack_group(const std::byte* w_data, size_t w_stride, int n, int64_t nb, std::byte* group) {
  constexpr int64_t kBytes = kSuperblockBytes<Block>;
  std::memset(group, 0, static_cast<size_t>(nb * kBytes));
  for (int r = 0; r < n; ++r) {
    const auto* row = reinterpret_cast<const Block*>(w_data + r * w_stride);
    for (int64_t b = 0; b < nb; ++b) {
      std::byte* sb = group + b * kBytes;
      for (int c = 0; c < 32; ++c)
        std::memcpy(sb + kQsAt + (c * kRows + r) * 4, row[b].qs + 4 * c, 4);
      if constexpr (kHighBit<Block>)
        for (int c = 0; c < 8; ++c)
          std::memcpy(sb + kQhAt + (c * kRows + r) * 4, row[b].qh + 4 * c, 4);
      for (int v = 0; v < 3; ++v)
        std::memcpy(sb + kScalesAt + (v * kRows + r) * 4, row[b].scales + 4 * v, 4);
      std::memcpy(sb + kDAt + r * 4, &row[b], 4);  // d, dmin
    }
  }
}

// Sub-block j's 6-bit scale or min of the 16 rows (int32 lanes) from the scale words
// (k_scales.h's unpack_k_scale_min, lane by lane). Sub-blocks 0-3: byte j of word kWord (0:
// scales, 1: mins). 4-7: the low (scales) or high (mins, kNibble 4) nibble of word 2's byte
// j - 4, and the top 2 bits of word kWord's byte j - 4 above it.
template <int j, int kWord, int kNibble>
inline __m512i six_bits(const __m512i* words) {
  const __m512i six = _mm512_set1_epi32(63);
  if constexpr (j < 4) {
    return _mm512_and_si512(_mm512_srli_epi32(words[kWord], 8 * j), six);
  } else {
    // 0xE4: C ? A : B, bit by bit — the nibble's 4 bits from A, the rest from B.
    return _mm512_ternarylogic_epi32(_mm512_srli_epi32(words[2], 8 * (j - 4) + kNibble),
                                     _mm512_srli_epi32(words[kWord], 8 * (j - 4) + 2),
                                     _mm512_set1_epi32(0x0F), 0xE4) &
           six;
  }
}
template <int j>
inline __m512i scale_of(const __m512i* words) {
  return six_bits<j, 0, 0>(words);
}
template <int j>
inline __m512i min_of(const __m512i* words) {
  return six_bits<j, 1, 4>(words);
}

// What the dots take from a token's activation super-block besides its qs: the pair sums of
// its 16-element sums, bsum_2j + bsum_2j+1 for sub-block j.
struct PairSums {
  int32_t of[8];
};
PairSums pair_sums(const BlockQ8_K& a) {
  PairSums out;
  for (int j = 0; j < 8; ++j) out.of[j] = a.bsums[2 * j] + a.bsums[2 * j + 1];
  return out;
}

template <class B>
struct WithMinsLayout;

// The 16 rows' mins of a super-block, m[j] for sub-block j.
inline void mins_of(const __m512i* words, __m512i* m) {
  m[0] = min_of<0>(words), m[1] = min_of<1>(words), m[2] = min_of<2>(words),
  m[3] = min_of<3>(words);
  m[4] = min_of<4>(words), m[5] = min_of<5>(words), m[6] = min_of<6>(words),
  m[7] = min_of<7>(words);
}

// A super-block's two chain steps (avx512/vec_dot_k.cpp) for 16 rows: S1 joins by f16(d) · a.d,
// then S2 = Σ_j m_j · pair_sums[j] leaves by f16(dmin) · a.d. d_dmin: the rows' (d, dmin).
inline void join_chain(__m512& chain, __m512i s1, const __m512i* m, const PairSums& pairs,
                       __m512i d_dmin, float a_d) {
  __m512i s2 = _mm512_mullo_epi32(m[0], _mm512_set1_epi32(pairs.of[0]));
  for (int j = 1; j < 8; ++j)
    s2 = _mm512_add_epi32(s2, _mm512_mullo_epi32(m[j], _mm512_set1_epi32(pairs.of[j])));
  const __m512 scale = _mm512_set1_ps(a_d);
  const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(d_dmin)), scale);
  const __m512 dmin =
      _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(d_dmin, 16))), scale);
  chain = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), d, chain);
  chain = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(s2), dmin, chain);
}

inline void prefetch_header(const std::byte* sb) { prefetch_lines(sb, kQsAt); }

// The 16 rows' quants of chunk c of sub-block pair p (c < 8): elements 64p + 4c .. +3 of
// sub-block 2p (lo) and 64p + 32 + 4c .. +3 of sub-block 2p + 1 (hi). Q4_K's hi stays in the
// high nibbles, 16 times the quants (one op fewer; S1Parts shifts it back); Q5_K's take their
// fifth bit from bits 2p and 2p + 1 of qh chunk c.
template <class Block, int p>
inline void unpack_quants(const std::byte* sb, int c, __m512i& lo, __m512i& hi) {
  const __m512i x = load_line(sb + kQsAt + (8 * p + c) * 64);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  if constexpr (kHighBit<Block>) {
    const __m512i qh = _mm512_loadu_si512(sb + kQhAt + c * 64);  // in L1 after p = 0
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    auto to_bit4 = [](__m512i v, int bit) {  // bit `bit` of each byte moved to bit 4
      return bit <= 4 ? _mm512_slli_epi32(v, 4 - bit) : _mm512_srli_epi32(v, bit - 4);
    };
    // 0xF8: A | (B & C).
    lo = _mm512_ternarylogic_epi32(_mm512_and_si512(x, low4), to_bit4(qh, 2 * p), bit4, 0xF8);
    hi = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(x, 4), low4),
                                   to_bit4(qh, 2 * p + 1), bit4, 0xF8);
  } else {
    lo = _mm512_and_si512(x, low4);
    hi = _mm512_and_si512(x, _mm512_set1_epi8(static_cast<char>(0xF0)));
  }
}

// S1 = Σ_j sc_j · Σ q · a over sub-block j of 16 rows: the low nibbles' sums (even j) as they
// are, the high nibbles' (odd j) as unpack_quants left them; Q4_K's are 16 times theirs,
// shifted back once at the end: every term a multiple of 16, so exactly. |16 · S1| < 2^31
// (avx512/vec_dot_k.cpp's bound on S1, times 16).
template <class Block>
struct S1Parts {
  __m512i low = _mm512_setzero_si512(), high = _mm512_setzero_si512();
  __m512i sum() const {
    return _mm512_add_epi32(low, kHighBit<Block> ? high : _mm512_srai_epi32(high, 4));
  }
};

// Up to this many tokens the Amx level takes the VNNI dots; beyond, the AMX tiles.
// matmul_bench, 2048 x 2048, 2 threads, µs, VNNI / AMX on restored rows: T = 16: 310 / 639,
// 32: 586 / 696, 64: 1106 / 950.
constexpr int64_t kMaxVnniTokens = 32;

// One group per stream (kGroups of them) against one token: each activation dword broadcast
// once for all the groups. For each super-block and row the exact S1 and S2 of
// avx512/vec_dot_k.cpp, then its two chain steps, chain b % 16.
template <class Block, int kGroups>
void group_dots_one_token(const std::byte* const* groups, int64_t nb,
                          const DotTokens<WithMinsLayout<Block>>& a, float* const* y,
                          const int* rows) {
  GroupChains<1, kGroups> chains;
  chains.zero(1);
  const BlockQ8_K* act = a.act(0);
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* sb[kGroups];
    __m512i words[kGroups][3];
    for (int g = 0; g < kGroups; ++g) {
      sb[g] = groups[g] + b * kSuperblockBytes<Block>;
      prefetch_header(sb[g]);
      for (int v = 0; v < 3; ++v) words[g][v] = _mm512_loadu_si512(sb[g] + kScalesAt + 64 * v);
    }
    S1Parts<Block> s1[kGroups];
    auto pair = [&]<int p>() {
      __m512i lo[kGroups], hi[kGroups];
      for (int g = 0; g < kGroups; ++g) lo[g] = hi[g] = _mm512_setzero_si512();
      for (int c = 0; c < 8; ++c) {
        int32_t a0, a1;
        std::memcpy(&a0, act[b].qs + 64 * p + 4 * c, 4);
        std::memcpy(&a1, act[b].qs + 64 * p + 32 + 4 * c, 4);
        const __m512i lo_a = _mm512_set1_epi32(a0), hi_a = _mm512_set1_epi32(a1);
        for (int g = 0; g < kGroups; ++g) {
          __m512i lo_w, hi_w;
          unpack_quants<Block, p>(sb[g], c, lo_w, hi_w);
          lo[g] = _mm512_dpbusd_epi32(lo[g], lo_w, lo_a);
          hi[g] = _mm512_dpbusd_epi32(hi[g], hi_w, hi_a);
        }
      }
      for (int g = 0; g < kGroups; ++g) {
        s1[g].low =
            _mm512_add_epi32(s1[g].low, _mm512_mullo_epi32(lo[g], scale_of<2 * p>(words[g])));
        s1[g].high =
            _mm512_add_epi32(s1[g].high, _mm512_mullo_epi32(hi[g], scale_of<2 * p + 1>(words[g])));
      }
    };
    pair.template operator()<0>();
    pair.template operator()<1>();
    pair.template operator()<2>();
    pair.template operator()<3>();
    for (int g = 0; g < kGroups; ++g) {
      __m512i m[8];
      mins_of(words[g], m);
      join_chain(chains.c[0][g][b % kChains], s1[g].sum(), m, a.term(0, b),
                 _mm512_loadu_si512(sb[g] + kDAt), act[b].d);
    }
  }
  chains.store(1, y, 0, rows);
}

// The same for 2-15 tokens (batched decode, a prefill in parts): each qs line unpacked once for
// all the tokens. y[g]: group g's first output of token 0.
template <class Block, int kGroups>
void group_dots(const std::byte* const* groups, int64_t nb,
                const DotTokens<WithMinsLayout<Block>>& a, float* const* y, size_t ldy,
                const int* rows) {
  GroupChains<kMaxDotTokens, kGroups> chains;
  chains.zero(a.tokens);
  for (int64_t b = 0; b < nb; ++b) {
    for (int g = 0; g < kGroups; ++g) {
      const std::byte* sb = groups[g] + b * kSuperblockBytes<Block>;
      prefetch_header(sb);
      __m512i words[3];
      for (int v = 0; v < 3; ++v) words[v] = _mm512_loadu_si512(sb + kScalesAt + 64 * v);
      S1Parts<Block> s1[kMaxDotTokens];
      auto pair = [&]<int p>() {
        __m512i lo_w[8], hi_w[8];
        for (int c = 0; c < 8; ++c) unpack_quants<Block, p>(sb, c, lo_w[c], hi_w[c]);
        const __m512i sc_lo = scale_of<2 * p>(words), sc_hi = scale_of<2 * p + 1>(words);
        for (int64_t t = 0; t < a.tokens; ++t) {
          const int8_t* qs = a.act(t)[b].qs + 64 * p;
          __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
          for (int c = 0; c < 8; ++c) {
            int32_t a0, a1;
            std::memcpy(&a0, qs + 4 * c, 4);
            std::memcpy(&a1, qs + 32 + 4 * c, 4);
            lo = _mm512_dpbusd_epi32(lo, lo_w[c], _mm512_set1_epi32(a0));
            hi = _mm512_dpbusd_epi32(hi, hi_w[c], _mm512_set1_epi32(a1));
          }
          s1[t].low = _mm512_add_epi32(s1[t].low, _mm512_mullo_epi32(lo, sc_lo));
          s1[t].high = _mm512_add_epi32(s1[t].high, _mm512_mullo_epi32(hi, sc_hi));
        }
      };
      pair.template operator()<0>();
      pair.template operator()<1>();
      pair.template operator()<2>();
      pair.template operator()<3>();
      __m512i m[8];
      mins_of(words, m);
      const __m512i d_dmin = _mm512_loadu_si512(sb + kDAt);
      for (int64_t t = 0; t < a.tokens; ++t)
        join_chain(chains.c[t][g][b % kChains], s1[t].sum(), m, a.term(t, b), d_dmin,
                   a.act(t)[b].d);
    }
  }
  chains.store(a.tokens, y, ldy, rows);
}

template <class B>
struct WithMinsLayout {
  using Block = B;
  using Act = BlockQ8_K;
  using Term = PairSums;
  static constexpr int64_t kBlockElems = kQKK;
  static Term term(const BlockQ8_K& a) { return pair_sums(a); }
  static size_t group_bytes(int64_t nb) {
    return static_cast<size_t>(nb * kSuperblockBytes<Block>);
  }
  static void pack_group(const std::byte* w, size_t stride, int n, int64_t nb, std::byte* out) {
    tern::cpu::pack_group<Block>(w, stride, n, nb, out);
  }
  template <int kGroups>
  static void dots_one_token(const std::byte* const* groups, int64_t nb,
                             const DotTokens<WithMinsLayout>& a, float* const* y, const int* rows) {
    group_dots_one_token<Block, kGroups>(groups, nb, a, y, rows);
  }
  template <int kGroups>
  static void dots(const std::byte* const* groups, int64_t nb, const DotTokens<WithMinsLayout>& a,
                   float* const* y, size_t ldy, const int* rows) {
    group_dots<Block, kGroups>(groups, nb, a, y, ldy, rows);
  }
};
using Q4KLayout = WithMinsLayout<BlockQ4_K>;
using Q5KLayout = WithMinsLayout<BlockQ5_K>;

// The Amx level: the AMX GEMM beyond kMaxVnniTokens.
void matmul_packed_tiles(int64_t k, const void* packed, int64_t rows, const void* a_data,
                         size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  if (tokens > kMaxVnniTokens) {
    amx_gemm_q4_k_packed(k, packed, rows, a_data, a_stride, tokens, y, ldy);
    return;
  }
  matmul_packed<Q4KLayout>(k, packed, rows, a_data, a_stride, tokens, y, ldy);
}

constexpr PackedKernels kPackedQ4KTiles{kRows, packed_bytes<Q4KLayout>, pack<Q4KLayout>,
                                        matmul_packed_tiles};

}  // namespace

void restore_q4_k_rows(const void* packed, int64_t group, int64_t nb, int rows, BlockQ4_K* out) {
  const std::byte* base =
      static_cast<const std::byte*>(packed) + group * nb * kSuperblockBytes<BlockQ4_K>;
  for (int r = 0; r < rows; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* sb = base + b * kSuperblockBytes<BlockQ4_K>;
      BlockQ4_K& w = out[r * nb + b];
      std::memcpy(&w, sb + kDAt + r * 4, 4);
      for (int v = 0; v < 3; ++v)
        std::memcpy(w.scales + 4 * v, sb + kScalesAt + (v * kRows + r) * 4, 4);
    }
  // The qs, 16 chunks at a time: chunk c's lane r is row r's dword c, a transpose.
  for (int64_t b = 0; b < nb; ++b)
    for (int half = 0; half < 2; ++half) {
      __m512 chunks[kRows], rows_of_dwords[kRows];
      for (int i = 0; i < kRows; ++i)
        chunks[i] = _mm512_castsi512_ps(_mm512_loadu_si512(base + b * kSuperblockBytes<BlockQ4_K> +
                                                           kQsAt + (16 * half + i) * 64));
      transpose16(chunks, rows_of_dwords);
      for (int r = 0; r < rows; ++r)
        _mm512_storeu_si512(out[r * nb + b].qs + 64 * half, _mm512_castps_si512(rows_of_dwords[r]));
    }
}

const PackedKernels* amx_packed_k(DType weight) {
  return weight == DType::Q4_K ? &kPackedQ4KTiles : nullptr;
}
const PackedKernels* chains16_packed_q4_k() { return &kPacked<Q4KLayout>; }
GemmTileFn chains16_gemm_q4_k() { return gemm<Q4KLayout>; }
const PackedKernels* chains16_packed_q5_k() { return &kPacked<Q5KLayout>; }
GemmTileFn chains16_gemm_q5_k() { return gemm<Q5KLayout>; }

}  // namespace tern::cpu
