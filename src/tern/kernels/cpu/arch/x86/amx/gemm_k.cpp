// The AMX level's GEMM for Q4_K, Q5_K and Q6_K weights (Q8_K activations): the arithmetic
// defined in avx512/vec_dot_k.cpp, its integers from AMX-INT8 tiles, bit for bit what that file's
// GEMV computes for every element.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/amx/tiles.h"
#include "tern/kernels/cpu/arch/x86/avx512/k_common.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/stealing_split.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// Here the weights are the A operand (16 rows × 64 int8, row-major as unpacked) and the
// activations the B operand (16 groups of 4 elements × 16 tokens × 4 int8), so a C tile is
// 16 rows × 16 tokens and the epilogue works on the 16 tokens of one row per register.
//
// Tile registers: 0, 1 = C lo, hi of token tile 0; 2, 3 = C lo, hi of token tile 1; 4, 5 = A
// (the weights' lo and hi bytes of one 64-element chunk); 6, 7 = B (each token tile's chunk).
void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  load_tile_config(cfg);
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
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo),
                      _mm512_cvtepi16_epi8(_mm512_and_si512(w, _mm512_set1_epi16(127))));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi),
                      _mm512_cvtepi16_epi8(_mm512_srai_epi16(w, 7)));
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
    if constexpr (std::is_same_v<Block, BlockQ5_K>)
      qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh));
    for (int c = 0; c < kChunks; ++c) {
      // Elements 64c..64c+31 are the low nibbles of qs[32c..], 64c+32.. the high ones.
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * c));
      __m256i lo4 = _mm256_and_si256(bits, _mm256_set1_epi8(0x0f));
      __m256i hi4 = _mm256_and_si256(_mm256_srli_epi16(bits, 4), _mm256_set1_epi8(0x0f));
      if constexpr (std::is_same_v<Block, BlockQ5_K>) {
        // Bit s of qh[l] is the fifth bit of element l of sub-block s.
        const __m256i one = _mm256_set1_epi8(1);
        lo4 = _mm256_or_si256(
            lo4, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
        hi4 = _mm256_or_si256(
            hi4, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
      }
      int8_t* lo = q + c * 2 * kPartBytes;
      int8_t* hi = lo + kPartBytes;
      store_split(_mm512_mullo_epi16(_mm512_cvtepu8_epi16(lo4), _mm512_set1_epi16(sm[2 * c])), lo,
                  hi);
      store_split(_mm512_mullo_epi16(_mm512_cvtepu8_epi16(hi4), _mm512_set1_epi16(sm[2 * c + 1])),
                  lo + 32, hi + 32);
    }
  } else {
    const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
    const __m512i shift_a = halves16(4, 2), shift_b = halves16(0, 2);
    for (int half = 0; half < 2; ++half) {
      const __m512i ql = _mm512_loadu_si512(w.ql + 64 * half);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh + 32 * half)));
      // Chunks 2 half and 2 half + 1, 64 quants 0..63 each, as in the GEMV.
      const __m512i chunk[2] = {
          _mm512_or_si512(_mm512_and_si512(ql, low4),
                          _mm512_and_si512(_mm512_sllv_epi16(qh, shift_a), bits45)),
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                          _mm512_and_si512(_mm512_srlv_epi16(qh, shift_b), bits45))};
      for (int h = 0; h < 2; ++h) {
        const int c = 2 * half + h;
        int8_t* lo = q + c * 2 * kPartBytes;
        int8_t* hi = lo + kPartBytes;
        for (int part = 0; part < 2; ++part) {  // 32 elements: sub-blocks 4c + 2 part, + 1
          const __m512i q16 = _mm512_sub_epi16(
              _mm512_cvtepu8_epi16(part == 0 ? _mm512_castsi512_si256(chunk[h])
                                             : _mm512_extracti64x4_epi64(chunk[h], 1)),
              _mm512_set1_epi16(32));
          const __m512i sc = halves16(w.scales[4 * c + 2 * part], w.scales[4 * c + 2 * part + 1]);
          store_split(_mm512_mullo_epi16(q16, sc), lo + 32 * part, hi + 32 * part);
        }
      }
    }
  }
}

template <class Block>
void unpack_weights(const std::byte* w_data, size_t w_stride, int rows, int64_t nb,
                    UnpackedWeights& out) {
  if (rows < kChains) {
    std::fill(out.q.begin(), out.q.end(), int8_t{0});
    std::fill(out.d.begin(), out.d.end(), 0.0f);
    std::fill(out.dmin.begin(), out.dmin.end(), 0.0f);
    std::fill(out.mins.begin(), out.mins.end(), 0);
  }
  for (int r = 0; r < rows; ++r) {
    const auto* w = reinterpret_cast<const Block*>(w_data + r * w_stride);
    for (int64_t b = 0; b < nb; ++b)
      unpack_superblock(w[b], out.q.data() + b * kChunks * 2 * kPartBytes + r * kChunk,
                        &out.d[b * kChains + r], &out.dmin[b * kChains + r],
                        &out.mins[(b * kChains + r) * 4]);
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

void pack_activations(const std::byte* a_data, size_t a_stride, int64_t tokens, int64_t nb,
                      bool with_bsums, PackedActivations& out) {
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
  parallel_for(tokens, [&](int64_t t) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(a_data + t * a_stride);
    const int64_t tile = t / kChains, lane = t % kChains;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t sb = tile * nb + b;
      auto* dst = reinterpret_cast<int32_t*>(q + sb * kQKK * kChains) + lane;
      for (int g = 0; g < kQKK / 4; ++g) std::memcpy(dst + g * kChains, a[b].qs + 4 * g, 4);
      d[sb * kChains + lane] = a[b].d;
      if (with_bsums) {
        for (int i = 0; i < 4; ++i) {
          const int lo = a[b].bsums[4 * i] + a[b].bsums[4 * i + 1],
                    hi = a[b].bsums[4 * i + 2] + a[b].bsums[4 * i + 3];
          bsums[(sb * 4 + i) * kChains + lane] =
              static_cast<int32_t>(static_cast<uint16_t>(lo) | static_cast<uint32_t>(hi) << 16);
        }
      }
    }
  });
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
inline void join_chains(const int32_t (*c)[kChains * kChains], const UnpackedWeights& w,
                        const TokenTile& a, int64_t b, __m512* chain) {
  const __m512 a_d = _mm512_loadu_ps(a.d + b * kChains);
  __m512i bsums[4];
  if constexpr (kHasMins<Block>)
    for (int i = 0; i < 4; ++i) bsums[i] = _mm512_loadu_si512(a.bsums + (b * 4 + i) * kChains);
  for (int r = 0; r < kChains; ++r) {
    const __m512i s1 = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c[1] + r * kChains), 7),
                                        _mm512_load_si512(c[0] + r * kChains));
    const __m512 d = _mm512_mul_ps(_mm512_set1_ps(w.d[b * kChains + r]), a_d);
    // A chain's first super-block adds to +0, as the GEMV's lanes start (no zeroed chains to load).
    __m512 acc =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), d, b < kChains ? _mm512_setzero_ps() : chain[r]);
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

// The chains' tree on a row's 16 tokens at once (chains no super-block reached, j ≥ nb, are
// +0 as in the GEMV); then the tile into y, token-major.
void finish_tile(__m512* chains, int64_t nb, float* y, size_t ldy, int rows, int tokens) {
  for (int width = kChains / 2; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j) {
      for (int r = 0; r < kChains; ++r) {
        // After the first level every chain read has been written.
        const bool first = width == kChains / 2;
        const __m512 x = first && j >= nb ? _mm512_setzero_ps() : chains[j * kChains + r];
        const __m512 z =
            first && j + width >= nb ? _mm512_setzero_ps() : chains[(j + width) * kChains + r];
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
void output_tiles(const UnpackedWeights& w, const TokenTile* a, int64_t nb, float* y, size_t ldy,
                  int rows) {
  // Per tile [16 chains][16 rows] of 16 tokens: 16 KiB, in L1; no need to zero (join_chains).
  thread_local __m512 chains[2][kChains * kChains];
  // [stage][tile][lo, hi]: the int32 sums of one super-block.
  alignas(64) int32_t c[2][2][2][kChains * kChains];
  multiply_superblock<kTiles>(w.q.data(), a, 0);
  store_superblock<kTiles>(c[0]);
  for (int64_t b = 0; b < nb; ++b) {
    if (b + 1 < nb) multiply_superblock<kTiles>(w.q.data(), a, b + 1);
    for (int i = 0; i < kTiles; ++i)
      join_chains<Block>(c[b % 2][i], w, a[i], b, chains[i] + (b % kChains) * kChains);
    if (b + 1 < nb) store_superblock<kTiles>(c[(b + 1) % 2]);
  }
  for (int i = 0; i < kTiles; ++i)
    finish_tile(chains[i], nb, y + i * kChains * ldy, ldy, rows, a[i].tokens);
}

// Below this many tokens the few-token kernel (the GEMV's arithmetic, each weight super-block
// unpacked once for all tokens) beats laying the weights out for mostly empty tiles.
constexpr int64_t kMinTileTokens = 16;
static_assert(kMinTileTokens - 1 <= kMaxFewTokens);

// The tiles over every row tile and token tile. tile_rows(rt, n, scratch) gives row tile rt's
// n rows in the file's layout as (first row, bytes from one row to the next): in place, or
// restored into `scratch`.
template <class Block, class TileRows>
void gemm_tiles(int64_t k, TileRows tile_rows, int64_t rows, const void* a_data, size_t a_stride,
                int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQKK;
  thread_local PackedActivations packed;
  pack_activations(static_cast<const std::byte*>(a_data), a_stride, tokens, nb, kHasMins<Block>,
                   packed);
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
  // A member lays out its rows once and takes every token tile past them.
  StealingSplit split = StealingSplit::even(team_threads(), row_tiles);
  run_team(split.threads(), [&](int member) {
    configure_tiles();
    UnpackedWeights w;
    w.resize(nb);
    std::vector<Block> scratch;
    for (StealingSplit::Range r; (r = split.next(member)).count > 0;) {
      const int64_t rt = r.first;
      const int n = static_cast<int>(std::min<int64_t>(kChains, rows - rt * kChains));
      const auto [w_data, w_stride] = tile_rows(rt, n, scratch);
      unpack_weights<Block>(w_data, w_stride, n, nb, w);
      for (int64_t tt = 0; tt < token_tiles; tt += 2) {
        const TokenTile a[2] = {token_tile(tt), token_tile(std::min(tt + 1, token_tiles - 1))};
        auto* tile = tt + 1 < token_tiles ? output_tiles<Block, 2> : output_tiles<Block, 1>;
        tile(w, a, nb, y + tt * kChains * ldy + rt * kChains, ldy, n);
      }
    }
    _tile_release();
  });
}

template <class Block>
void gemm(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data,
          size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  if (tokens < kMinTileTokens) {
    amx_gemm_k_few_tokens<Block>(k, wbytes, w_stride, rows, static_cast<const std::byte*>(a_data),
                                 a_stride, tokens, y, ldy);
    return;
  }
  auto in_place = [=](int64_t rt, int, std::vector<Block>&) {
    return std::pair(wbytes + rt * kChains * w_stride, w_stride);
  };
  gemm_tiles<Block>(k, in_place, rows, a_data, a_stride, tokens, y, ldy);
}

}  // namespace

void amx_gemm_q4_k_packed(int64_t k, const void* packed, int64_t rows, const void* a_data,
                          size_t a_stride, int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQKK;
  auto restored = [=](int64_t rt, int n, std::vector<BlockQ4_K>& scratch) {
    scratch.resize(static_cast<size_t>(n * nb));
    restore_q4_k_rows(packed, rt, nb, n, scratch.data());
    return std::pair(reinterpret_cast<const std::byte*>(scratch.data()),
                     static_cast<size_t>(nb) * sizeof(BlockQ4_K));
  };
  gemm_tiles<BlockQ4_K>(k, restored, rows, a_data, a_stride, tokens, y, ldy);
}

GemmTileFn amx_gemm_k(DType weight) {
  switch (weight) {
    case DType::Q4_K:
      return gemm<BlockQ4_K>;
    case DType::Q5_K:
      return gemm<BlockQ5_K>;
    case DType::Q6_K:
      return gemm<BlockQ6_K>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
