// The AMX level's Q4_0 and Q8_0 matmuls: the 16-chain dots of avx512/q_packed.h up to
// kMaxVnniTokens tokens, and beyond the GEMM on AMX tiles here, bit for bit the same values.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/amx/tiles.h"
#include "tern/kernels/cpu/arch/x86/avx512/q_packed.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/stealing_split.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

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
  parallel_for(tokens, [&](int64_t t) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(a_data + t * a_stride);
    const int64_t tile = t / kRows, lane = t % kRows;
    for (int64_t b = 0; b < nb; ++b) {
      std::memcpy(out.qs.data() + ((tile * nb + b) * kRows + lane) * kQK, a[b].qs, kQK);
      out.d[static_cast<size_t>((tile * nb + b) * kRows + lane)] = _cvtsh_ss(a[b].d);
    }
  });
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
  // A member takes every token tile past a group before the next one.
  StealingSplit split = StealingSplit::even(team_threads(), groups);
  run_team(split.threads(), [&](int member) {
    configure_tiles();
    std::vector<std::byte> scratch;
    std::vector<int8_t> unpacked;
    for (StealingSplit::Range r; (r = split.next(member)).count > 0;) {
      const int64_t g = r.first;
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
  });
}

}  // namespace

GemmTileFn amx_gemm_q(DType weight) { return gemm_of<true>(weight); }
const PackedKernels* amx_packed_q(DType weight) { return packed_of<true>(weight); }

}  // namespace tern::cpu
