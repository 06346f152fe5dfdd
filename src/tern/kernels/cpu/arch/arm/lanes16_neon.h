// The 16-chain arithmetic (generic/vec_dot_16lane.cpp) in NEON registers, for the kernels of
// every ARM level: 16 float chains as four float32x4 (register q holds chains 4q..4q+3), the
// fixed tree that sums them, and the integer dot of 16 int8 pairs that each level does its own
// way (the `Dot` policies: widening multiplies on Neon, sdot on Dotprod). Integer sums are
// exact whatever the order, so every policy gives the same values. Internal linkage, so each
// file compiles its own copy with its own level's flags.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "tern/blocks/block_layouts.h"

namespace tern::cpu {
namespace {

constexpr int kChainRegs = 4;  // 16 chains, 4 per register

struct Chains16 {
  float32x4_t r[kChainRegs] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),
                               vdupq_n_f32(0.0f)};
};

// Lane l of x + lane l + 2, then lane 0 + lane 1: the last two steps of the tree.
inline float sum_tree4(float32x4_t x) {
  const float32x4_t pairs = vaddq_f32(x, vextq_f32(x, x, 2));
  return vgetq_lane_f32(pairs, 0) + vgetq_lane_f32(pairs, 1);
}

// The fixed tree over 16 lanes: j + (j + 8), then + 4, + 2, + 1.
inline float sum_chains(const float32x4_t* r) {
  return sum_tree4(vaddq_f32(vaddq_f32(r[0], r[2]), vaddq_f32(r[1], r[3])));
}
inline float sum_chains(const Chains16& c) { return sum_chains(c.r); }

// Four blocks' exact integer sums and float scales into chains 4q..4q+3 (block i of the four in
// lane i), where q = (first block index / 4) % 4. Unused lanes carry zeros: fma(0, 0, c) = c,
// since a chain, started at +0, is never −0.
inline void fma_blocks4(Chains16& c, int64_t first_block, int32x4_t isums, float32x4_t scales) {
  float32x4_t& r = c.r[(first_block / 4) % kChainRegs];
  r = vfmaq_f32(r, vcvtq_f32_s32(isums), scales);
}
// The K types' second term: chain = fma(−S2, dmin, chain).
inline void fms_blocks4(Chains16& c, int64_t first_block, int32x4_t isums, float32x4_t scales) {
  float32x4_t& r = c.r[(first_block / 4) % kChainRegs];
  r = vfmsq_f32(r, vcvtq_f32_s32(isums), scales);
}

// Lanes [x0 + x1 + x2 + x3 (over x0's lanes), …]: one exact total per input register.
inline int32x4_t totals4(int32x4_t x0, int32x4_t x1, int32x4_t x2, int32x4_t x3) {
  return vpaddq_s32(vpaddq_s32(x0, x1), vpaddq_s32(x2, x3));
}

inline float32x4_t f16x4_to_f32(const uint16_t h[4]) {
  uint16x4_t bits;
  std::memcpy(&bits, h, sizeof bits);
  return vcvt_f32_f16(vreinterpret_f16_u16(bits));
}

// Σ x_i y_i of 16 int8 pairs into the 4 int32 lanes of acc, with widening multiplies (each
// product fits int16: |x y| ≤ 2^14).
struct WideningDot {
  static int32x4_t dot(int32x4_t acc, int8x16_t x, int8x16_t y) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(x), vget_low_s8(y)));
    return vpadalq_s16(acc, vmull_high_s8(x, y));
  }
};

}  // namespace
}  // namespace tern::cpu
