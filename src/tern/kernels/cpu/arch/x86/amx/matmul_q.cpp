// The AMX level's Q4_0 and Q8_0 matmuls on weights packed in groups of 16 rows: the layout
// (made once at load, or per call for weights that were not), the dot kernel for 1-15 tokens
// (AVX-512 VNNI) and the GEMM on AMX tiles. Each output element is exactly what the level's
// GEMV (chains16/vec_dot_q.cpp, where the arithmetic is defined) gives for its row. The Avx512
// level (no AMX) runs the same, with passes of the dots for every token count.
//
// A group holds 16 consecutive rows (the last group padded with zero rows):
//   qs [nb][chunks][16 rows][4 bytes]   chunk c, lane r: bytes 4c..4c+3 of row r's block qs
//   d  [nb][16 rows] f16                the rows' block scales
// so one 64-byte load holds the same 4 bytes of 16 rows — the lanes of one vpdpbusd against
// 4 activation bytes broadcast — and the weights stream from one place, where the file's rows
// would be 16 streams whose scales must be gathered. Q8_0's 8 chunks of a block are, as they
// lie, the B tile AMX multiplies (8 rows of 16 columns × 4 bytes); Q4_0's 4 chunks hold
// elements 4c..4c+3 in their low nibbles and 16 + 4c.. in their high ones.
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tern/kernels/cpu/arch/x86/amx/tiles.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/quants/quant_blocks.h"
#include "tern/kernels/cpu/stealing_split.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

constexpr int kRows = 16;    // rows of a group = lanes of a register = rows and tokens of a tile
constexpr int kChains = 16;  // float chains per output element (chains16/vec_dot_q.cpp)

// ---- the layout ------------------------------------------------------------------------------

template <class W>
constexpr int kChunks = static_cast<int>(sizeof(W) - sizeof(uint16_t)) / 4;  // Q4_0: 4, Q8_0: 8
template <class W>
constexpr int64_t kBlockQsBytes = int64_t{kChunks<W>} * 4 * kRows;

template <class W>
size_t group_bytes(int64_t nb) {
  const auto bytes =
      static_cast<size_t>(nb * (kBlockQsBytes<W> + kRows * int64_t{sizeof(uint16_t)}));
  return (bytes + 63) / 64 * 64;  // every group 64-byte aligned
}

template <class W>
size_t packed_bytes(int64_t rows, int64_t k) {
  return static_cast<size_t>((rows + kRows - 1) / kRows) * group_bytes<W>(k / kQK);
}

// Rows [0, n) of a group from the file's layout; rows n..15 zero.
template <class W>
void pack_group(const std::byte* w_data, size_t w_stride, int n, int64_t nb, std::byte* out) {
  auto* qs = reinterpret_cast<uint32_t*>(out);
  auto* d = reinterpret_cast<uint16_t*>(out + nb * kBlockQsBytes<W>);
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < kRows; ++r) {
      const W* w = r < n ? reinterpret_cast<const W*>(w_data + r * w_stride) + b : nullptr;
      for (int c = 0; c < kChunks<W>; ++c) {
        uint32_t bytes = 0;
        if (w != nullptr) std::memcpy(&bytes, reinterpret_cast<const uint8_t*>(w->qs) + 4 * c, 4);
        qs[(b * kChunks<W> + c) * kRows + r] = bytes;
      }
      d[b * kRows + r] = w != nullptr ? w->d : uint16_t{0};
    }
  }
}

template <class W>
void pack(const void* w, size_t w_stride, int64_t rows, int64_t k, void* out) {
  const int64_t nb = k / kQK, groups = (rows + kRows - 1) / kRows;
  const auto* src = static_cast<const std::byte*>(w);
  auto* dst = static_cast<std::byte*>(out);
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g)
    pack_group<W>(src + g * kRows * w_stride, w_stride,
                  static_cast<int>(std::min<int64_t>(kRows, rows - g * kRows)), nb,
                  dst + g * group_bytes<W>(nb));
}

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

// The tree of the 16 chains of 16 rows (chains16/vec_dot_q.cpp's sum_chains, lane by lane).
inline __m512 sum_chains16(__m512* c) {
  for (int width = kChains / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) c[j] = _mm512_add_ps(c[j], c[j + width]);
  return c[0];
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

// ---- 27 tokens and more: AMX tiles -------------------------------------------------------------
//
// A tile of activations (16 tokens × one block of 32 int8, packed once per call) times a
// block's B tile gives the 256 isum_b of a 16-token × 16-row output tile; each joins its chain
// with one FMA, 16 rows of a token to a register, so a finished token is 16 contiguous outputs.

// Tile registers: 0, 3, 5, 6 = C (16 tokens × 16 int32; two token tiles × two blocks in
// flight), 1 and 4 = A (16 tokens × 32 bytes, one per token tile), 2 = B (8 rows of 16 weight
// rows × 4 bytes).
void configure_tiles() {
  TileConfig cfg;
  for (int c : {0, 3, 5, 6}) cfg.colsb[c] = 64, cfg.rows[c] = 16;
  for (int a : {1, 4}) cfg.colsb[a] = 32, cfg.rows[a] = 16;
  cfg.colsb[2] = 64, cfg.rows[2] = 8;
  load_tile_config(cfg);
}

// A group's B tiles, [nb][8 chunks][16 rows][4 int8]: Q8_0's qs as they lie; Q4_0's unpacked
// into `scratch` (q - 8).
template <class W>
const int8_t* signed_weights(const std::byte* group, int64_t nb, std::vector<int8_t>& scratch) {
  if constexpr (std::is_same_v<W, BlockQ8_0>) {
    return reinterpret_cast<const int8_t*>(group);
  } else {
    scratch.resize(static_cast<size_t>(nb * 8 * 64));
    const __m512i low = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    for (int64_t b = 0; b < nb; ++b)
      for (int c = 0; c < 4; ++c) {
        const __m512i x = _mm512_loadu_si512(group + (b * 4 + c) * 64);
        int8_t* out = scratch.data() + b * 512;
        _mm512_storeu_si512(out + 64 * c, _mm512_sub_epi8(_mm512_and_si512(x, low), eight));
        _mm512_storeu_si512(out + 64 * (c + 4),
                            _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(x, 4), low), eight));
      }
    return scratch.data();
  }
}

// The activations as A tiles, [token tiles][nb][16 tokens][32 int8] (a tile's 512 bytes in 8
// cache lines, not 16 rows of 16 lines apart), and their scales as floats, [token tiles][nb][16
// tokens]; missing tokens are 0.
struct PackedActivations {
  std::vector<int8_t> qs;
  std::vector<float> d;
};

void pack_activations(const std::byte* a_data, size_t a_stride, int64_t tokens, int64_t nb,
                      PackedActivations& out) {
  const int64_t tiles = (tokens + kRows - 1) / kRows;
  out.qs.resize(static_cast<size_t>(tiles * nb * kRows * kQK));
  out.d.resize(static_cast<size_t>(tiles * kRows * nb));
  if (tokens % kRows != 0) {  // the last tile's missing tokens
    std::fill(out.qs.end() - nb * kRows * kQK, out.qs.end(), int8_t{0});
    std::fill(out.d.end() - nb * kRows, out.d.end(), 0.0f);
  }
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(a_data + t * a_stride);
    const int64_t tile = t / kRows, lane = t % kRows;
    for (int64_t b = 0; b < nb; ++b) {
      std::memcpy(out.qs.data() + ((tile * nb + b) * kRows + lane) * kQK, a[b].qs, kQK);
      out.d[static_cast<size_t>((tile * nb + b) * kRows + lane)] = _cvtsh_ss(a[b].d);
    }
  }
}

// One token tile's activations: its A tiles [nb][16][32] and scales [nb][16 tokens].
struct TokenTile {
  const int8_t* qs;
  const float* d;
  int tokens;
};

// The chains' tree on a token's 16 rows at once (chains [16 chains][16 tokens]); then its row
// into y.
void finish_tile(__m512* chains, float* y, size_t ldy, int rows, int tokens) {
  for (int width = kChains / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j)
      for (int t = 0; t < kRows; ++t)
        chains[j * kRows + t] =
            _mm512_add_ps(chains[j * kRows + t], chains[(j + width) * kRows + t]);
  const auto live = static_cast<__mmask16>((1u << rows) - 1);
  for (int t = 0; t < tokens; ++t) _mm512_mask_storeu_ps(y + t * ldy, live, chains[t]);
}

// Block b of kTiles (1 or 2) token tiles into the C tiles of `kStage`: the weight tile loaded
// once for both.
template <int kTiles, int kStage>
inline void multiply_block(const int8_t* wq, const TokenTile* a, int64_t b) {
  _tile_loadd(2, wq + b * 512, 64);
  _tile_loadd(1, a[0].qs + b * kRows * kQK, kQK);
  if constexpr (kStage == 0) {
    _tile_zero(0);
    _tile_dpbssd(0, 1, 2);
  } else {
    _tile_zero(5);
    _tile_dpbssd(5, 1, 2);
  }
  if constexpr (kTiles == 2) {
    _tile_loadd(4, a[1].qs + b * kRows * kQK, kQK);
    if constexpr (kStage == 0) {
      _tile_zero(3);
      _tile_dpbssd(3, 4, 2);
    } else {
      _tile_zero(6);
      _tile_dpbssd(6, 4, 2);
    }
  }
}
template <int kTiles, int kStage>
inline void store_block(int32_t (*c)[kRows * kRows]) {
  if constexpr (kStage == 0) {
    _tile_stored(0, c[0], kRows * 4);
    if constexpr (kTiles == 2) _tile_stored(3, c[1], kRows * 4);
  } else {
    _tile_stored(5, c[0], kRows * 4);
    if constexpr (kTiles == 2) _tile_stored(6, c[1], kRows * 4);
  }
}

// kTiles (1 or 2) output tiles of 16 tokens × 16 rows that share their rows: every block
// through the tiles, then the chains' tree. The tiles of block b + 1 are issued before block
// b's sums join their chains, so the tile unit works while the vector unit does.
template <int kTiles>
void output_tiles(const int8_t* wq, const uint16_t* wd, const TokenTile* a, int64_t nb, float* y,
                  size_t ldy, int rows) {
  // Per tile [16 chains][16 tokens] of 16 rows: 16 KiB, in L1.
  thread_local __m512 chains[2][kChains * kRows];
  for (int i = 0; i < kTiles; ++i)
    std::fill(chains[i], chains[i] + kChains * kRows, _mm512_setzero_ps());
  // [stage][tile]: the int32 sums of one block.
  alignas(64) int32_t c[2][2][kRows * kRows];
  multiply_block<kTiles, 0>(wq, a, 0);
  store_block<kTiles, 0>(c[0]);
  for (int64_t b = 0; b < nb; ++b) {
    if (b + 1 < nb) {
      if (b % 2 == 0) {
        multiply_block<kTiles, 1>(wq, a, b + 1);
      } else {
        multiply_block<kTiles, 0>(wq, a, b + 1);
      }
    }
    // Block b's 256 sums of each tile join their chains: one FMA per token's 16 rows.
    const __m512 w_scale =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wd + b * kRows)));
    for (int i = 0; i < kTiles; ++i) {
      const int32_t* sums = c[b % 2][i];
      const float* a_scales = a[i].d + b * kRows;
      __m512* chain = chains[i] + (b % kChains) * kRows;
      for (int t = 0; t < kRows; ++t) {
        const __m512 scale = _mm512_mul_ps(w_scale, _mm512_set1_ps(a_scales[t]));
        chain[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(sums + t * kRows)), scale,
                                   chain[t]);
      }
    }
    if (b + 1 < nb) {
      if (b % 2 == 0) {
        store_block<kTiles, 1>(c[1]);
      } else {
        store_block<kTiles, 0>(c[0]);
      }
    }
  }
  for (int i = 0; i < kTiles; ++i)
    finish_tile(chains[i], y + i * kRows * ldy, ldy, rows, a[i].tokens);
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

// The matmul on AMX tiles (27 tokens and more), a thread's groups consecutive.
template <class W, class GroupAt>
void matmul_tiles(int64_t k, GroupAt group_at, int64_t rows, const void* a_data, size_t a_stride,
                  int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQK, groups = (rows + kRows - 1) / kRows;
  const auto* abytes = static_cast<const std::byte*>(a_data);
  auto rows_of = [=](int64_t g) {
    return static_cast<int>(std::min<int64_t>(kRows, rows - g * kRows));
  };
  thread_local PackedActivations packed;
  pack_activations(abytes, a_stride, tokens, nb, packed);
  const int64_t token_tiles = (tokens + kRows - 1) / kRows;
  const int8_t* qs = packed.qs.data();  // pointers before the region, as above
  const float* scales = packed.d.data();
  auto token_tile = [=](int64_t tt) {
    return TokenTile{qs + tt * nb * kRows * kQK, scales + tt * nb * kRows,
                     static_cast<int>(std::min<int64_t>(kRows, tokens - tt * kRows))};
  };
#pragma omp parallel
  {
    configure_tiles();
    std::vector<std::byte> scratch;
    std::vector<int8_t> unpacked;
    // A thread takes every token tile past a group before the next one.
#pragma omp for schedule(static)
    for (int64_t g = 0; g < groups; ++g) {
      const std::byte* group = group_at(g, scratch);
      const int8_t* wq = signed_weights<W>(group, nb, unpacked);
      const auto* wd = reinterpret_cast<const uint16_t*>(group + nb * kBlockQsBytes<W>);
      for (int64_t tt = 0; tt < token_tiles; tt += 2) {
        const TokenTile a[2] = {token_tile(tt), token_tile(std::min(tt + 1, token_tiles - 1))};
        auto* tile = tt + 1 < token_tiles ? output_tiles<2> : output_tiles<1>;
        tile(wq, wd, a, nb, y + tt * kRows * ldy + g * kRows, ldy, rows_of(g));
      }
    }
    _tile_release();
  }
}

// Every group through the kernel that fits the token count. Without tiles (kTiles false: a CPU
// with AVX-512 VNNI and no AMX) every token count runs as passes of the dots.
template <class W, bool kTiles, class GroupAt>
void matmul_groups(int64_t k, GroupAt group_at, int64_t rows, const void* a_data, size_t a_stride,
                   int64_t tokens, float* y, size_t ldy) {
  if (kTiles && tokens > kMaxVnniTokens) {
    matmul_tiles<W>(k, group_at, rows, a_data, a_stride, tokens, y, ldy);
  } else {
    matmul_dots<W>(k, group_at, rows, a_data, a_stride, tokens, y, ldy);
  }
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

GemmTileFn amx_gemm_q(DType weight) { return gemm_of<true>(weight); }
const PackedKernels* amx_packed_q(DType weight) { return packed_of<true>(weight); }
GemmTileFn vnni_gemm_q(DType weight) { return gemm_of<false>(weight); }
const PackedKernels* vnni_packed_q(DType weight) { return packed_of<false>(weight); }

}  // namespace tern::cpu
