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
// time); the GEMM keeps them in memory, one per block position, vectorised over 16 tokens.
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

#include "tern/kernels/cpu/quant_blocks.h"
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

// The exact sums of 16 consecutive blocks, lane j = block j, from their 8 pair dots.
inline __m512i block_sums16(const __m512i d[8]) {
  // Each step adds lanes pairwise and interleaves two registers, so after three steps every
  // block's 8 lanes are one; integer sums, so the order is free.
  __m512i e[4], f[2];
  for (int i = 0; i < 4; ++i)
    e[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(d[2 * i], d[2 * i + 1]),
                            _mm512_unpackhi_epi32(d[2 * i], d[2 * i + 1]));
  for (int i = 0; i < 2; ++i)
    f[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(e[2 * i], e[2 * i + 1]),
                            _mm512_unpackhi_epi64(e[2 * i], e[2 * i + 1]));
  // 128-bit lane q of f[0] holds pairs 0-3's sums of their lane q: blocks 2p (q = 0, 1) and
  // 2p + 1 (q = 2, 3).
  const __m512i g = _mm512_add_epi32(_mm512_shuffle_i32x4(f[0], f[1], 0x88), _mm512_shuffle_i32x4(f[0], f[1], 0xDD));
  // g's lanes are blocks 0 2 4 6 1 3 5 7 8 10 12 14 9 11 13 15.
  return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15), g);
}

// The f16 at the start of each of n ≤ 16 blocks `kStride` bytes apart, as floats (0 past n).
template <int kStride>
inline __m512 first_halves(const void* blocks, int n) {
  const auto* p = static_cast<const uint8_t*>(blocks);
  alignas(32) uint16_t h[16] = {};
  for (int i = 0; i < n; ++i) std::memcpy(&h[i], p + i * kStride, sizeof(uint16_t));
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
}

// The fixed tree over the 16 chains: j + (j + 8), then + 4, + 2, + 1.
inline float sum_chains(__m512 chains) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(chains), _mm512_extractf32x8_ps(chains, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
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
    const __m512 scale = _mm512_mul_ps(first_halves<sizeof(W)>(w + b, kChains), first_halves<sizeof(BlockQ8_0)>(a + b, kChains));
    chains = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sums16(d)), scale, chains);
  }
  if (const int rest = static_cast<int>(nb - b); rest > 0) {
    alignas(64) int32_t sums[kChains] = {};
    for (int j = 0; j < rest; ++j) sums[j] = block_dot(w[b + j], a[b + j]);
    const __m512 scale = _mm512_mul_ps(first_halves<sizeof(W)>(w + b, rest), first_halves<sizeof(BlockQ8_0)>(a + b, rest));
    chains = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums)), scale, chains,
                                   static_cast<__mmask16>((1u << rest) - 1));
  }
  return sum_chains(chains);
}

// ---- the GEMM on AMX tiles -------------------------------------------------------------------
//
// A tile of weights (16 rows × one block of 32 int8) times a tile of activations (one block of
// 16 tokens in AMX's 4-byte-interleaved layout) gives the 256 isum_b of a 16 × 16 output tile;
// each then joins its chain with one FMA, 16 tokens to a register.

// Tile registers: 0 and 3 = C (16 rows × 16 int32), 1 and 4 = A (16 rows × 32 bytes), 2 and 5
// = B (8 rows of 16 tokens × 4 bytes); two sets, so that two blocks are in flight.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void load_tile_config() {
  TileConfig cfg;
  for (int set = 0; set < 2; ++set) {
    cfg.colsb[3 * set + 0] = 64, cfg.rows[3 * set + 0] = 16;
    cfg.colsb[3 * set + 1] = 32, cfg.rows[3 * set + 1] = 16;
    cfg.colsb[3 * set + 2] = 64, cfg.rows[3 * set + 2] = 8;
  }
  // GCC 12 may drop the stores above as dead before _tile_loadconfig reads them (it does not
  // see the instruction read memory): make them visible to it.
  __asm__ volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}

// Per 16-token tile and block: the activations as AMX's B operand (row i holds bytes
// 4i..4i+3 of each token, token after token) and the tokens' scales; missing tokens are 0.
struct PackedActivations {
  std::vector<int32_t> b;  // [token tiles][nb][8][16]
  std::vector<float> d;    // [token tiles][nb][16]
};

void pack_activations(const std::byte* a_data, size_t a_stride, int64_t tokens, int64_t nb, PackedActivations& out) {
  const int64_t tiles = (tokens + kChains - 1) / kChains;
  out.b.assign(static_cast<size_t>(tiles * nb * 8 * kChains), 0);
  out.d.assign(static_cast<size_t>(tiles * nb * kChains), 0.0f);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(a_data + t * a_stride);
    const int64_t tile = t / kChains, lane = t % kChains;
    for (int64_t b = 0; b < nb; ++b) {
      int32_t* dst = out.b.data() + ((tile * nb + b) * 8) * kChains + lane;
      for (int i = 0; i < 8; ++i) std::memcpy(dst + i * kChains, a[b].qs + 4 * i, 4);
      out.d[static_cast<size_t>((tile * nb + b) * kChains + lane)] = f16(a[b].d);
    }
  }
}

// The weights of up to 16 rows as int8 A tiles, [nb][16 rows][32], and their scales
// [nb][16]; missing rows are 0.
template <class W>
void unpack_weights(const std::byte* w_data, size_t w_stride, int rows, int64_t nb, int8_t* q, float* d) {
  std::memset(q, 0, static_cast<size_t>(nb * kChains * kQK));
  std::fill(d, d + nb * kChains, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const auto* w = reinterpret_cast<const W*>(w_data + r * w_stride);
    for (int64_t b = 0; b < nb; ++b) {
      int8_t* dst = q + (b * kChains + r) * kQK;
      if constexpr (std::is_same_v<W, BlockQ4_0>) {
        const __m128i qs = load128(w[b].qs);
        const __m128i lo = _mm_and_si128(qs, _mm_set1_epi8(0x0F));
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(qs, 4), _mm_set1_epi8(0x0F));
        const __m256i v = _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), v);
      } else {
        std::memcpy(dst, w[b].qs, kQK);
      }
      d[b * kChains + r] = f16(w[b].d);
    }
  }
}

// One 16-row × 16-token output tile: every block through the tiles, then the chains' tree.
void output_tile(const int8_t* wq, const float* wd, const int32_t* ab, const float* ad, int64_t nb, float* y,
                 size_t ldy, int rows, int tokens) {
  // [16 chains][16 rows] of 16 tokens: 16 KiB, in L1.
  thread_local __m512 chains[kChains * kChains];
  std::fill(chains, chains + kChains * kChains, _mm512_setzero_ps());
  alignas(64) int32_t c[2][kChains * kChains];
  // Block b's 256 sums join their chains: one FMA per row of 16 tokens.
  auto add_block = [&](int64_t b, const int32_t* sums) {
    __m512* chain = chains + (b % kChains) * kChains;
    const __m512 a_scale = _mm512_loadu_ps(ad + b * kChains);
    for (int r = 0; r < kChains; ++r) {
      const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(wd[b * kChains + r]), a_scale);
      chain[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums + r * kChains)), scale, chain[r]);
    }
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    _tile_loadd(1, wq + b * kChains * kQK, kQK);
    _tile_loadd(2, ab + b * 8 * kChains, kChains * 4);
    _tile_loadd(4, wq + (b + 1) * kChains * kQK, kQK);
    _tile_loadd(5, ab + (b + 1) * 8 * kChains, kChains * 4);
    _tile_zero(0);
    _tile_zero(3);
    _tile_dpbssd(0, 1, 2);
    _tile_dpbssd(3, 4, 5);
    _tile_stored(0, c[0], kChains * 4);
    _tile_stored(3, c[1], kChains * 4);
    add_block(b, c[0]);
    add_block(b + 1, c[1]);
  }
  if (b < nb) {
    _tile_loadd(1, wq + b * kChains * kQK, kQK);
    _tile_loadd(2, ab + b * 8 * kChains, kChains * 4);
    _tile_zero(0);
    _tile_dpbssd(0, 1, 2);
    _tile_stored(0, c[0], kChains * 4);
    add_block(b, c[0]);
  }
  // The tree of sum_chains, on 16 tokens at once.
  for (int width = kChains / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j)
      for (int r = 0; r < kChains; ++r) chains[j * kChains + r] = _mm512_add_ps(chains[j * kChains + r], chains[(j + width) * kChains + r]);
  alignas(64) float out[kChains];
  for (int r = 0; r < rows; ++r) {
    _mm512_store_ps(out, chains[r]);
    for (int t = 0; t < tokens; ++t) y[t * ldy + r] = out[t];
  }
}

template <class W>
void gemm(int64_t k, const void* w_data, size_t w_stride, int64_t rows, const void* a_data, size_t a_stride,
          int64_t tokens, float* y, size_t ldy) {
  const int64_t nb = k / kQK;
  thread_local PackedActivations packed;
  pack_activations(static_cast<const std::byte*>(a_data), a_stride, tokens, nb, packed);
  const int64_t row_tiles = (rows + kChains - 1) / kChains, token_tiles = (tokens + kChains - 1) / kChains;
  const auto* wbytes = static_cast<const std::byte*>(w_data);
  const int32_t* ab = packed.b.data();
  const float* ad = packed.d.data();
#pragma omp parallel
  {
    load_tile_config();
    std::vector<int8_t> wq(static_cast<size_t>(nb * kChains * kQK));
    std::vector<float> wd(static_cast<size_t>(nb * kChains));
    // A thread unpacks its rows once and takes every token tile past them.
#pragma omp for schedule(static)
    for (int64_t rt = 0; rt < row_tiles; ++rt) {
      const int n = static_cast<int>(std::min<int64_t>(kChains, rows - rt * kChains));
      unpack_weights<W>(wbytes + rt * kChains * w_stride, w_stride, n, nb, wq.data(), wd.data());
      for (int64_t tt = 0; tt < token_tiles; ++tt) {
        const int m = static_cast<int>(std::min<int64_t>(kChains, tokens - tt * kChains));
        output_tile(wq.data(), wd.data(), ab + tt * nb * 8 * kChains, ad + tt * nb * kChains, nb,
                    y + tt * kChains * ldy + rt * kChains, ldy, n, m);
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
