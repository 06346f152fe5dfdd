// The AMX level's kernels for Q4_0 and Q8_0 weights (Q8_0 activations): a GEMM on AMX-INT8
// tiles and the GEMV (AVX-512 VNNI) that computes exactly what it computes.
//
// AMX multiplies 16 × 16 int8 matrices into exact int32 sums. To use it and stay batch
// invariant, this level defines each output element by integers first:
//   isum_b  = Σ over block b's 32 elements of w · a        (exact, w = q - 8 for Q4_0)
//   scale_b = f16(w_b.d) · f16(a_b.d)                       (one rounding)
//   chain_j = fma(isum_b, scale_b, chain_j) for the blocks b ≡ j (mod 16) in ascending order,
//             from +0 (16 chains, j = 0..15)
//   y       = the 16 chains summed in a fixed tree: j + (j + 8), then + 4, + 2, + 1.
// The GEMV keeps the 16 chains in the 16 lanes of one register (a row's blocks come 16 at a
// time); the GEMM keeps them in memory, one per block position, vectorised over 16 rows.
// Both do the same float operations on the same values, so every element is bit for bit the
// same whether its token ran alone or in a batch, on any number of threads.
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
#include "tern/kernels/cpu/amx_tiles.h"
#include "tern/kernels/cpu/quant_blocks.h"
#include "tern/kernels/cpu/simd_avx512_common.h"
#include "tern/kernels/cpu/simd_common.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

constexpr int kChains = 16;  // = lanes of a register = tokens and rows of a tile

inline float f16(uint16_t h) { return _cvtsh_ss(h); }
inline __m512i load2x256(const void* lo, const void* hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(lo))),
                            _mm256_loadu_si256(static_cast<const __m256i*>(hi)), 1);
}
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// ---- the GEMV --------------------------------------------------------------------------------

// Blocks w[0], w[1] against a[0], a[1]: 8 int32 lanes per block, each the exact sum of 4
// products (block 0 in lanes 0-7).
inline __m512i pair_dot(const BlockQ4_0* w, const BlockQ8_0* a) {
  const __m512i qs = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(load128(w[0].qs)), 0xFF00, load128(w[1].qs));
  // Low nibbles are elements 0-15, high nibbles 16-31: shift the second copy of each qs down.
  const __m512i q = _mm512_and_si512(_mm512_srlv_epi64(qs, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)),
                                     _mm512_set1_epi8(0x0F));
  const __m512i av = load2x256(a[0].qs, a[1].qs);
  // Σ (q - 8) a = Σ q a - Σ 8 a; vpdpbusd takes the unsigned q and the signed a.
  return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, av),
                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), av));
}
inline __m512i pair_dot(const BlockQ8_0* w, const BlockQ8_0* a) {
  // Both signed: (a + 128) is unsigned, and 128 · Σ w comes off.
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i wv = load2x256(w[0].qs, w[1].qs);
  const __m512i av = _mm512_xor_si512(load2x256(a[0].qs, a[1].qs), flip);
  return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), av, wv),
                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, wv));
}
inline int32_t block_dot(const BlockQ4_0& w, const BlockQ8_0& a) {
  int32_t sum = 0;
  for (int j = 0; j < kQK / 2; ++j)
    sum += ((w.qs[j] & 0x0F) - 8) * a.qs[j] + ((w.qs[j] >> 4) - 8) * a.qs[j + kQK / 2];
  return sum;
}
inline int32_t block_dot(const BlockQ8_0& w, const BlockQ8_0& a) {
  int32_t sum = 0;
  for (int j = 0; j < kQK; ++j) sum += w.qs[j] * a.qs[j];
  return sum;
}

// The f16 at the start of each of n < 16 blocks `kStride` bytes apart, as floats (0 past n).
template <int kStride>
inline __m512 first_halves(const void* blocks, int n) {
  const auto* p = static_cast<const uint8_t*>(blocks);
  alignas(32) uint16_t h[16] = {};
  for (int i = 0; i < n; ++i) std::memcpy(&h[i], p + i * kStride, sizeof(uint16_t));
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
}

// The blocks b .. nb-1 after the last group of 16, into chains 0 .. nb-b-1.
template <class W>
inline __m512 add_tail(__m512 chains, const W* w, const BlockQ8_0* a, int64_t b, int64_t nb) {
  const int rest = static_cast<int>(nb - b);
  if (rest == 0) return chains;
  alignas(64) int32_t sums[kChains] = {};
  for (int j = 0; j < rest; ++j) sums[j] = block_dot(w[b + j], a[b + j]);
  const __m512 scale = _mm512_mul_ps(first_halves<sizeof(W)>(w + b, rest), first_halves<sizeof(BlockQ8_0)>(a + b, rest));
  return _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums)), scale, chains,
                               static_cast<__mmask16>((1u << rest) - 1));
}

template <class W>
float vec_dot(int64_t k, const void* w_row, const void* a_row) {
  const auto* w = static_cast<const W*>(w_row);
  const auto* a = static_cast<const BlockQ8_0*>(a_row);
  const int64_t nb = k / kQK;
  __m512 chains = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + kChains <= nb; b += kChains) {
    prefetch_ahead(w + b, kChains * sizeof(W));
    __m512i d[8];
    for (int p = 0; p < 8; ++p) d[p] = pair_dot(w + b + 2 * p, a + b + 2 * p);
    const __m512 scale = _mm512_mul_ps(first_halves16<sizeof(W)>(w + b), first_halves16<sizeof(BlockQ8_0)>(a + b));
    chains = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sums16(d)), scale, chains);
  }
  return sum_chains(add_tail(chains, w, a, b, nb));
}

// ---- a few tokens: the GEMV's arithmetic, each weight block unpacked once for all of them ----
//
// For a handful of tokens (batched decode) AMX tiles would be mostly empty and laying out the
// weights for them costs more than the products. This kernel computes exactly vec_dot's
// values, with what vec_dot redoes per call prepared once: the tokens' qs contiguous (one load
// per pair), their scales as floats and their offset terms per block; each weight pair is
// unpacked once for every token.

constexpr int kMaxFewTokens = 15;  // = kMinTileTokens - 1

struct FewTokens {
  std::vector<uint8_t> qs;      // [tokens][nb][32]: Q8_0 weights: a + 128 (unsigned); Q4_0: a
  std::vector<float> d;         // [tokens][nb]
  std::vector<int32_t> offset;  // [tokens][nb]: Q4_0: 8 · Σ a per block
};

template <class W>
void prepare_few_tokens(const std::byte* a_data, size_t a_stride, int64_t tokens, int64_t nb, FewTokens& out) {
  out.qs.resize(static_cast<size_t>(tokens * nb * kQK));
  out.d.resize(static_cast<size_t>(tokens * nb));
  out.offset.resize(static_cast<size_t>(tokens * nb));
  for (int64_t t = 0; t < tokens; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(a_data + t * a_stride);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* dst = out.qs.data() + (t * nb + b) * kQK;
      int32_t sum = 0;
      for (int j = 0; j < kQK; ++j) {
        dst[j] = static_cast<uint8_t>(std::is_same_v<W, BlockQ8_0> ? a[b].qs[j] ^ 0x80 : a[b].qs[j]);
        sum += a[b].qs[j];
      }
      out.d[static_cast<size_t>(t * nb + b)] = f16(a[b].d);
      out.offset[static_cast<size_t>(t * nb + b)] = 8 * sum;
    }
  }
}

template <class W>
void gemm_few_tokens(int64_t k, const std::byte* w_data, size_t w_stride, int64_t rows, const std::byte* a_data,
                     size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQK;
  thread_local FewTokens prepared;
  prepare_few_tokens<W>(a_data, a_stride, tokens, nb, prepared);
  // Pointers, not the thread_local `prepared`: in the parallel region that name would be the
  // worker threads' own (empty) one.
  const uint8_t* qs = prepared.qs.data();
  const float* ds = prepared.d.data();
  const int32_t* offsets = prepared.offset.data();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const auto* w = reinterpret_cast<const W*>(w_data + r * w_stride);
    __m512 chains[kMaxFewTokens];
    for (int64_t t = 0; t < tokens; ++t) chains[t] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + kChains <= nb; b += kChains) {
      prefetch_ahead(w + b, kChains * sizeof(W));
      // The weight side of the 8 pairs, and what the offset takes off every token's sums:
      // Q4_0's (8 · Σ a) is per token, Q8_0's (128 · Σ w) per weight block.
      __m512i q[8];
      __m512i weight_offset = _mm512_setzero_si512();
      if constexpr (std::is_same_v<W, BlockQ4_0>) {
        for (int p = 0; p < 8; ++p) {
          const __m512i x = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(load128(w[b + 2 * p].qs)), 0xFF00,
                                                        load128(w[b + 2 * p + 1].qs));
          q[p] = _mm512_and_si512(_mm512_srlv_epi64(x, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(0x0F));
        }
      } else {
        __m512i d[8];
        for (int p = 0; p < 8; ++p) {
          q[p] = load2x256(w[b + 2 * p].qs, w[b + 2 * p + 1].qs);
          d[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(0x80)), q[p]);
        }
        weight_offset = block_sums16(d);
      }
      const __m512 w_scales = first_halves16<sizeof(W)>(w + b);
      for (int64_t t = 0; t < tokens; ++t) {
        const uint8_t* at = qs + (t * nb + b) * kQK;
        __m512i d[8];
        for (int p = 0; p < 8; ++p) {
          const __m512i av = _mm512_loadu_si512(at + 64 * p);
          d[p] = std::is_same_v<W, BlockQ4_0> ? _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[p], av)
                                              : _mm512_dpbusd_epi32(_mm512_setzero_si512(), av, q[p]);
        }
        const __m512i offset = std::is_same_v<W, BlockQ4_0> ? _mm512_loadu_si512(offsets + t * nb + b) : weight_offset;
        const __m512i sums = _mm512_sub_epi32(block_sums16(d), offset);
        const __m512 scale = _mm512_mul_ps(w_scales, _mm512_loadu_ps(ds + t * nb + b));
        chains[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, chains[t]);
      }
    }
    for (int64_t t = 0; t < tokens; ++t) {
      const auto* a = reinterpret_cast<const BlockQ8_0*>(a_data + t * a_stride);
      y[t * ldy + r] = sum_chains(add_tail(chains[t], w, a, b, nb));
    }
  }
}

// ---- the GEMM on AMX tiles -------------------------------------------------------------------
//
// A tile of activations (16 tokens × one block of 32 int8, packed once per call) times
// a tile of weights (one block of 16 rows in AMX's 4-byte-interleaved layout) gives the 256
// isum_b of a 16-token × 16-row output tile; each joins its chain with one FMA, 16 rows of a
// token to a register, so a finished token is 16 contiguous outputs.

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

// Up to 16 weight rows as B tiles, [nb][8][16 rows] of 4 int8 (row i of a block's tile holds
// elements 4i..4i+3 of each weight row), and their scales [nb][16]; missing rows are 0.
template <class W>
void unpack_weights(const std::byte* w_data, size_t w_stride, int rows, int64_t nb, int32_t* q, float* d) {
  if (rows < kChains) {
    std::fill(q, q + nb * 8 * kChains, 0);
    std::fill(d, d + nb * kChains, 0.0f);
  }
  for (int r = 0; r < rows; ++r) {
    const auto* w = reinterpret_cast<const W*>(w_data + r * w_stride);
    for (int64_t b = 0; b < nb; ++b) {
      alignas(32) int32_t row[8];
      if constexpr (std::is_same_v<W, BlockQ4_0>) {
        const __m128i qs = load128(w[b].qs);
        const __m128i lo = _mm_and_si128(qs, _mm_set1_epi8(0x0F));
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(qs, 4), _mm_set1_epi8(0x0F));
        _mm256_store_si256(reinterpret_cast<__m256i*>(row),
                           _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8)));
      } else {
        std::memcpy(row, w[b].qs, kQK);
      }
      for (int i = 0; i < 8; ++i) q[(b * 8 + i) * kChains + r] = row[i];
      d[b * kChains + r] = f16(w[b].d);
    }
  }
}

// The activations as A tiles, [token tiles][nb][16 tokens][32 int8] (a tile's 512 bytes in 8
// cache lines, not 16 rows of 16 lines apart), and their scales as floats, [token tiles][nb][16
// tokens]; missing tokens are 0.
struct PackedActivations {
  std::vector<int8_t> qs;
  std::vector<float> d;
};

void pack_activations(const std::byte* a_data, size_t a_stride, int64_t tokens, int64_t nb, PackedActivations& out) {
  const int64_t tiles = (tokens + kChains - 1) / kChains;
  out.qs.resize(static_cast<size_t>(tiles * nb * kChains * kQK));
  out.d.resize(static_cast<size_t>(tiles * kChains * nb));
  if (tokens % kChains != 0) {  // the last tile's missing tokens
    std::fill(out.qs.end() - nb * kChains * kQK, out.qs.end(), int8_t{0});
    std::fill(out.d.end() - nb * kChains, out.d.end(), 0.0f);
  }
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(a_data + t * a_stride);
    const int64_t tile = t / kChains, lane = t % kChains;
    for (int64_t b = 0; b < nb; ++b) {
      std::memcpy(out.qs.data() + ((tile * nb + b) * kChains + lane) * kQK, a[b].qs, kQK);
      out.d[static_cast<size_t>((tile * nb + b) * kChains + lane)] = f16(a[b].d);
    }
  }
}

// One token tile's activations: its A tiles [nb][16][32] and scales [nb][16 tokens].
struct TokenTile {
  const int8_t* qs;
  const float* d;
  int tokens;
};

// The tree of sum_chains on a token's 16 rows at once; then its row into y.
void finish_tile(__m512* chains, float* y, size_t ldy, int rows, int tokens) {
  for (int width = kChains / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j)
      for (int t = 0; t < kChains; ++t)
        chains[j * kChains + t] = _mm512_add_ps(chains[j * kChains + t], chains[(j + width) * kChains + t]);
  const auto live = static_cast<__mmask16>((1u << rows) - 1);
  for (int t = 0; t < tokens; ++t) _mm512_mask_storeu_ps(y + t * ldy, live, chains[t]);
}

// Block b of kTiles (1 or 2) token tiles into the C tiles of `kStage`: the weight tile loaded
// once for both.
template <int kTiles, int kStage>
inline void multiply_block(const int32_t* wq, const TokenTile* a, int64_t b) {
  _tile_loadd(2, wq + b * 8 * kChains, kChains * 4);
  _tile_loadd(1, a[0].qs + b * kChains * kQK, kQK);
  if constexpr (kStage == 0) {
    _tile_zero(0);
    _tile_dpbssd(0, 1, 2);
  } else {
    _tile_zero(5);
    _tile_dpbssd(5, 1, 2);
  }
  if constexpr (kTiles == 2) {
    _tile_loadd(4, a[1].qs + b * kChains * kQK, kQK);
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
inline void store_block(int32_t (*c)[kChains * kChains]) {
  if constexpr (kStage == 0) {
    _tile_stored(0, c[0], kChains * 4);
    if constexpr (kTiles == 2) _tile_stored(3, c[1], kChains * 4);
  } else {
    _tile_stored(5, c[0], kChains * 4);
    if constexpr (kTiles == 2) _tile_stored(6, c[1], kChains * 4);
  }
}
template <int kTiles, int kStage>
inline void next_block(const int32_t* wq, const TokenTile* a, int64_t b, int32_t (*c)[kChains * kChains]) {
  multiply_block<kTiles, kStage>(wq, a, b);
  store_block<kTiles, kStage>(c);
}

// kTiles (1 or 2) output tiles of 16 tokens × 16 rows that share their rows: every block
// through the tiles, then the chains' tree. The tiles of block b + 1 are issued before block
// b's sums join their chains, so the tile unit works while the vector unit does.
template <int kTiles>
void output_tiles(const int32_t* wq, const float* wd, const TokenTile* a, int64_t nb, float* y, size_t ldy, int rows) {
  // Per tile [16 chains][16 tokens] of 16 rows: 16 KiB, in L1.
  thread_local __m512 chains[2][kChains * kChains];
  for (int i = 0; i < kTiles; ++i) std::fill(chains[i], chains[i] + kChains * kChains, _mm512_setzero_ps());
  // [stage][tile]: the int32 sums of one block.
  alignas(64) int32_t c[2][2][kChains * kChains];
  next_block<kTiles, 0>(wq, a, 0, c[0]);
  for (int64_t b = 0; b < nb; ++b) {
    if (b + 1 < nb) {
      if (b % 2 == 0) {
        multiply_block<kTiles, 1>(wq, a, b + 1);
      } else {
        multiply_block<kTiles, 0>(wq, a, b + 1);
      }
    }
    // Block b's 256 sums of each tile join their chains: one FMA per token's 16 rows.
    const __m512 w_scale = _mm512_loadu_ps(wd + b * kChains);
    for (int i = 0; i < kTiles; ++i) {
      const int32_t* sums = c[b % 2][i];
      const float* a_scales = a[i].d + b * kChains;
      __m512* chain = chains[i] + (b % kChains) * kChains;
      for (int t = 0; t < kChains; ++t) {
        const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(a_scales[t]), w_scale);
        chain[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums + t * kChains)), scale, chain[t]);
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
  for (int i = 0; i < kTiles; ++i) finish_tile(chains[i], y + i * kChains * ldy, ldy, rows, a[i].tokens);
}

// Below this many tokens gemm_few_tokens beats laying out the weights for mostly empty tiles
// (2048 x 2048, two threads, µs, few-token kernel / AMX tiles: Q4_0 T = 4: 140 / 414, T = 8:
// 265 / 435, T = 12: 463 / 451; AMX at T = 16: 521, Avx512's tiles: 667).
constexpr int64_t kMinTileTokens = 16;
static_assert(kMaxFewTokens == kMinTileTokens - 1);

template <class W>
void gemm(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data, size_t a_stride,
          int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQK;
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const auto* abytes = static_cast<const std::byte*>(a_data);
  if (tokens < kMinTileTokens) {
    gemm_few_tokens<W>(k, wbytes, w_stride, rows, abytes, a_stride, tokens, y, ldy);
    return;
  }
  thread_local PackedActivations packed;
  pack_activations(abytes, a_stride, tokens, nb, packed);
  const int64_t token_tiles = (tokens + kChains - 1) / kChains;
  // Pointers, not the thread_local `packed`: in the parallel region that name would be the
  // worker threads' own (empty) one.
  const int8_t* qs = packed.qs.data();
  const float* scales = packed.d.data();
  auto token_tile = [=](int64_t tt) {
    return TokenTile{qs + tt * nb * kChains * kQK, scales + tt * nb * kChains,
                     static_cast<int>(std::min<int64_t>(kChains, tokens - tt * kChains))};
  };
  const int64_t row_tiles = (rows + kChains - 1) / kChains;
#pragma omp parallel
  {
    configure_tiles();
    std::vector<int32_t> wq(static_cast<size_t>(nb * 8 * kChains));
    std::vector<float> wd(static_cast<size_t>(nb * kChains));
    // A thread lays out its rows once and takes every token tile past them.
#pragma omp for schedule(static)
    for (int64_t rt = 0; rt < row_tiles; ++rt) {
      const int n = static_cast<int>(std::min<int64_t>(kChains, rows - rt * kChains));
      unpack_weights<W>(wbytes + rt * kChains * w_stride, w_stride, n, nb, wq.data(), wd.data());
      for (int64_t tt = 0; tt < token_tiles; tt += 2) {
        const TokenTile a[2] = {token_tile(tt), token_tile(std::min(tt + 1, token_tiles - 1))};
        auto* tile = tt + 1 < token_tiles ? output_tiles<2> : output_tiles<1>;
        tile(wq.data(), wd.data(), a, nb, y + tt * kChains * ldy + rt * kChains, ldy, n);
      }
    }
    _tile_release();
  }
}

}  // namespace

VecDotFn amx_vec_dot_q(DType weight) {
  switch (weight) {
    case DType::Q4_0: return vec_dot<BlockQ4_0>;
    case DType::Q8_0: return vec_dot<BlockQ8_0>;
    default: return nullptr;
  }
}

GemmTileFn amx_gemm_q(DType weight) {
  switch (weight) {
    case DType::Q4_0: return gemm<BlockQ4_0>;
    case DType::Q8_0: return gemm<BlockQ8_0>;
    default: return nullptr;
  }
}

}  // namespace tern::cpu
