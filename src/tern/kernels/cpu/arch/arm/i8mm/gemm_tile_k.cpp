// GEMM tiles of Q4_K, Q5_K and Q6_K weights with smmla (tile2x2.h): per super-block and 2-row
// × 2-token tile, each sub-block's four exact dots from smmla, scaled by its rows' 6-bit (Q6_K:
// int8) scales into S1 (Q6_K: S), the mins term S2 from the tokens' bsums. Every output is bit
// for bit the level's vec_dot (dotprod/vec_dot_k.cpp): the same integers, the same chains.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "tern/kernels/cpu/arch/arm/dotprod/sdot.h"
#include "tern/kernels/cpu/arch/arm/i8mm/tile2x2.h"
#include "tern/kernels/cpu/arch/arm/vec_dot_k_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

// [x0, x0, x1, x1]: a per-row value in smmla's output order (row-major over 2 × 2).
inline int32x4_t per_row(int32_t x0, int32_t x1) {
  const int32_t v[4] = {x0, x0, x1, x1};
  return vld1q_s32(v);
}

// One Q4_K / Q5_K super-block of rows w0, w1 against tokens a0, a1: S1 and S2 of each output.
template <class Block>
inline void superblock_mm(const Block* const w[2], const BlockQ8_K* const a[2], int64_t b,
                          int32x4_t& s1, int32x4_t& s2) {
  int sc[2][8], m[2][8];
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 8; ++j) unpack_k_scale_min(w[r][b].scales, j, &sc[r][j], &m[r][j]);
  s1 = vdupq_n_s32(0);
  for (int p = 0; p < 4; ++p) {
    int8x16_t q0[4], q1[4];
    k_affine_pair(w[0][b], p, q0);
    k_affine_pair(w[1][b], p, q1);
    const int8_t* y0 = a[0][b].qs + 64 * p;
    const int8_t* y1 = a[1][b].qs + 64 * p;
    for (int half = 0; half < 2; ++half) {  // sub-block j = 2p + half
      const int o = 32 * half, j = 2 * p + half;
      int32x4_t d =
          mm16(vdupq_n_s32(0), q0[2 * half], q1[2 * half], vld1q_s8(y0 + o), vld1q_s8(y1 + o));
      d = mm16(d, q0[2 * half + 1], q1[2 * half + 1], vld1q_s8(y0 + o + 16), vld1q_s8(y1 + o + 16));
      s1 = vmlaq_s32(s1, d, per_row(sc[0][j], sc[1][j]));
    }
  }
  int32_t mins[4];
  for (int t = 0; t < 2; ++t) {
    const int16x8_t bsum32 = vpaddq_s16(vld1q_s16(a[t][b].bsums), vld1q_s16(a[t][b].bsums + 8));
    const int32x4_t lo = vmovl_s16(vget_low_s16(bsum32)), hi = vmovl_high_s16(bsum32);
    for (int r = 0; r < 2; ++r)
      mins[2 * r + t] =
          vaddvq_s32(vaddq_s32(vmulq_s32(lo, lanes_of(m[r])), vmulq_s32(hi, lanes_of(m[r] + 4))));
  }
  s2 = vld1q_s32(mins);
}

inline void superblock_mm(const BlockQ6_K* const w[2], const BlockQ8_K* const a[2], int64_t b,
                          int32x4_t& s, int32x4_t&) {
  s = vdupq_n_s32(0);
  for (int sub = 0; sub < 16; ++sub) {
    const int32x4_t d =
        mm16(vdupq_n_s32(0), q6_k_sub_block(w[0][b], sub), q6_k_sub_block(w[1][b], sub),
             vld1q_s8(a[0][b].qs + 16 * sub), vld1q_s8(a[1][b].qs + 16 * sub));
    s = vmlaq_s32(s, d, per_row(w[0][b].scales[sub], w[1][b].scales[sub]));
  }
}

template <class Block>
struct KKind {
  using W = Block;
  using A = BlockQ8_K;
  static constexpr int64_t kBlockElems = kQKK;
  static float vec_dot(int64_t k, const void* w, const void* a) {
    return vec_dot_k<SdotDot, Block>(k, w, a);
  }
  static void tile2x2(int64_t nb, const W* const w[2], const A* const a[2], float* y, size_t ldy) {
    Chains16 chains[4];
    for (int64_t b = 0; b < nb; b += 4) {
      const int n = nb - b < 4 ? static_cast<int>(nb - b) : 4;
      int32x4_t s1[4], s2[4];
      uint16_t d[2][4] = {}, dmin[2][4] = {};
      float a_d[2][4] = {};
      for (int i = 0; i < 4; ++i) {
        s1[i] = s2[i] = vdupq_n_s32(0);
        if (i >= n) continue;
        superblock_mm(w, a, b + i, s1[i], s2[i]);
        for (int r = 0; r < 2; ++r) {
          d[r][i] = w[r][b + i].d;
          if constexpr (kHasMins<Block>) dmin[r][i] = w[r][b + i].dmin;
        }
        for (int t = 0; t < 2; ++t) a_d[t][i] = a[t][b + i].d;
      }
      const float32x4_t ad[2] = {vld1q_f32(a_d[0]), vld1q_f32(a_d[1])};
      const float32x4_t wd[2] = {f16x4_to_f32(d[0]), f16x4_to_f32(d[1])};
      fma_tile_blocks4(chains, b, s1, wd, ad);
      if constexpr (kHasMins<Block>) {
        const float32x4_t wdmin[2] = {f16x4_to_f32(dmin[0]), f16x4_to_f32(dmin[1])};
        fma_tile_blocks4(chains, b, s2, wdmin, ad, /*subtract=*/true);
      }
    }
    store_tile(chains, y, ldy);
  }
};

}  // namespace

GemmTileFn i8mm_gemm_tile_k(DType weight) {
  switch (weight) {
    case DType::Q4_K:
      return gemm_tile_2x2<KKind<BlockQ4_K>>;
    case DType::Q5_K:
      return gemm_tile_2x2<KKind<BlockQ5_K>>;
    case DType::Q6_K:
      return gemm_tile_2x2<KKind<BlockQ6_K>>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
