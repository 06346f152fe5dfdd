// 16 floats as one value, and the few operations on it that attention and the SiLU rows build
// on: loads, a fixed-order sum of each of 16 vectors' lanes, a lane max and exp. Written with the
// compilers' vector extensions (GCC 12 and clang 14 both take them), the same bits everywhere
// since every operation is lane-wise or a fixed shuffle. The three operations a level does with
// its own instructions (a fused multiply-add, f16 widening, 8-bit KV codes) come from a policy:
// ScalarF32x16 here, the twin the others are tested against, and one per level under arch/
// (x86/avx2/, x86/avx512/, arm/neon/ f32x16.cpp), so no ISA is chosen by the compiler here.
// Internal linkage: each level's files compile their own copy with their own flags.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tern/blocks/kv_dtype.h"
#include "tern/core/half.h"

namespace tern::cpu {
namespace {

// GCC's auto-vectoriser keeps to 256-bit registers under -march=native on AVX-512 CPUs and
// splits 16-lane loops oddly; a vector type makes the lanes explicit.
using F32x16 = float __attribute__((vector_size(64)));
using I32x16 = int32_t __attribute__((vector_size(64)));

inline F32x16 load16(const float* p) {
  F32x16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store16(float* p, F32x16 v) { std::memcpy(p, &v, sizeof v); }

// 16 f16 bit patterns in a register.
using U16x16 = uint16_t __attribute__((vector_size(32)));

// 16 bf16 values widened to floats (exact). f16's widening is the policy's.
inline F32x16 load16_bf16(const uint16_t* p) {
  U16x16 h;
  std::memcpy(&h, p, sizeof h);
  const I32x16 bits = __builtin_convertvector(h, I32x16) << 16;
  F32x16 v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
inline F32x16 splat16(float x) { return F32x16{} + x; }

// The lane indices 0..15, for masks.
inline I32x16 lane_index16() {
  return I32x16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
}

// Halves the lanes of two vectors of partial sums: lanes are in blocks of 2w, each block one
// key's partials; the result has blocks of w, alternately from x and y, each partial l of a
// block added to partial l + w. Used at w = 8, 4, 2, 1 it sums the 16 lanes of each key in the
// tree (l, l+8), (l, l+4), (l, l+2), (l, l+1).
inline F32x16 fold8(F32x16 x, F32x16 y) {
  return __builtin_shufflevector(x, y, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
         __builtin_shufflevector(x, y, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30,
                                 31);
}
inline F32x16 fold4(F32x16 x, F32x16 y) {
  return __builtin_shufflevector(x, y, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27) +
         __builtin_shufflevector(x, y, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
}
inline F32x16 fold2(F32x16 x, F32x16 y) {
  return __builtin_shufflevector(x, y, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29) +
         __builtin_shufflevector(x, y, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
}
inline F32x16 fold1(F32x16 x, F32x16 y) {
  return __builtin_shufflevector(x, y, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30) +
         __builtin_shufflevector(x, y, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
}

// Lane j of the result is the sum of the 16 lanes of acc[j], in the tree that
// sum_lanes_scalar spells out; the 16 trees run side by side
// (15 vector adds and 30 shuffles in all instead of 16 × 15 scalar adds). Which vectors pair
// up at each level is what puts key j's sum in lane j. acc is overwritten.
inline F32x16 sum_lanes_of_16(F32x16* acc) {
  for (int i = 0; i < 8; ++i) acc[i] = fold8(acc[i], acc[i + 8]);
  for (int i = 0; i < 4; ++i) acc[i] = fold4(acc[i], acc[i + 4]);
  for (int i = 0; i < 2; ++i) acc[i] = fold2(acc[i], acc[i + 2]);
  return fold1(acc[0], acc[1]);
}

// The scalar twin of one lane of sum_lanes_of_16 (and the whole-vector sum of a row).
inline float sum_lanes_scalar(F32x16 v) {
  float lane[16];
  store16(lane, v);
  for (int width = 8; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
  }
  return lane[0];
}

inline F32x16 max16(F32x16 a, F32x16 b) { return a > b ? a : b; }

// The largest lane (exact: max does not round, so the order does not matter).
inline float max_lane(F32x16 v) {
  v = max16(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  v = max16(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  v = max16(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  v = max16(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
  return v[0];
}

// The policy of the operations a level does with its own instructions, as every level's
// (arch/x86/avx2/, avx512/, arch/arm/neon/ f32x16.cpp) must give them:
//   fma16(a, b, c): a · b + c lane by lane with one rounding (a fused multiply-add). The build
//     never fuses `a * b + c` itself (-ffp-contract=off), so code that wants the fused form,
//     for speed or accuracy, says so here.
//   load16_f16(p): 16 f16 values widened to floats (exact); f16x16_to_f32(h) the same from a
//     register.
//   codes16<D>(p): 16 codes of an 8-bit KV dtype D as floats, the row's scale left out: int8
//     and E5M2 as their values, E4M3 as its value · 2⁻⁸ (its bits shifted into a half's fields;
//     kv_dequant's trick), the 2⁸ going into the key's scale.
// ScalarF32x16 spells them out in plain C++: the twin the levels are tested against, and what
// runs where no level has its own.

// The 8-bit codes in vector extensions, for policies whose f16 widening makes them fast enough.
using I8x16 = int8_t __attribute__((vector_size(16)));
using U8x16 = uint8_t __attribute__((vector_size(16)));
template <class L, KvDtype D>
inline F32x16 vector_codes16(const uint8_t* p) {
  if constexpr (D == KvDtype::Int8) {
    I8x16 c;
    std::memcpy(&c, p, sizeof c);
    return __builtin_convertvector(c, F32x16);
  } else {
    U8x16 c8;
    std::memcpy(&c8, p, sizeof c8);
    const U16x16 c = __builtin_convertvector(c8, U16x16);
    if constexpr (D == KvDtype::Fp8E5M2) {
      return L::f16x16_to_f32(c << 8);
    } else {
      return L::f16x16_to_f32(((c & 0x7f) << 7) | ((c & 0x80) << 8));
    }
  }
}

// The half of a policy a level without its own f16-vector and code widening shares: both go
// through the level's load16_f16 (CRTP: L derives from WidenThroughLoads<L>).
template <class L>
struct WidenThroughLoads {
  static F32x16 f16x16_to_f32(U16x16 h) {
    uint16_t bits[16];
    std::memcpy(bits, &h, sizeof bits);
    return L::load16_f16(bits);
  }
  template <KvDtype D>
  static F32x16 codes16(const uint8_t* p) {
    return vector_codes16<L, D>(p);
  }
};

struct ScalarF32x16 : WidenThroughLoads<ScalarF32x16> {
  static F32x16 fma16(F32x16 a, F32x16 b, F32x16 c) {
    for (int i = 0; i < 16; ++i) c[i] = std::fma(a[i], b[i], c[i]);
    return c;
  }
  static F32x16 load16_f16(const uint16_t* p) {
    F32x16 v;
    for (int i = 0; i < 16; ++i) v[i] = f16_to_f32(p[i]);
    return v;
  }
};

// e^x lane by lane, within 2 ulp of the correctly rounded value where that is a normal float
// (tested against std::exp); results below FLT_MIN are within a few units of the smallest
// subnormal; -inf and anything below -104 give +0, anything above 88.73 and +inf give +inf,
// NaN gives NaN. Softmax calls it on 16 scores at a time, where std::exp is a scalar call each.
//
// x = n·ln2 + r with n = round(x / ln2) and |r| ≤ ln2/2 (ln2 in two parts, so n·ln2_hi is exact
// for the n that occur); e^r by its Taylor series to r^7 (truncation < 6e-9 relative);
// 2^n applied as 2^(n/2) · 2^(n - n/2), two normal floats over the whole range of n.
// L: the level's policy (its fma16).
template <class L>
inline F32x16 exp16(F32x16 x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // 12 significant bits
  constexpr float kLn2Lo = 1.42860682030941723212e-6f;
  // Adding 1.5·2^23 rounds a float of magnitude < 2^22 to an integer, which then sits in the
  // low mantissa bits: no float → int conversion (undefined for NaN) is needed.
  constexpr float kRound = 12582912.0f;
  // Clamped, n stays in [-159, 129]: below, the result is 0 anyway; above, +inf. The
  // comparisons are false for NaN, which flows through to the result.
  F32x16 xc = x < -110.0f ? splat16(-110.0f) : x;
  xc = xc > 89.0f ? splat16(89.0f) : xc;
  const F32x16 t = L::fma16(xc, splat16(kLog2e), splat16(kRound));
  const F32x16 n = t - kRound;
  F32x16 r = L::fma16(-n, splat16(kLn2Hi), xc);
  r = L::fma16(-n, splat16(kLn2Lo), r);
  F32x16 p = splat16(1.0f / 5040);
  for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    p = L::fma16(p, r, splat16(c));
  I32x16 t_bits;
  std::memcpy(&t_bits, &t, sizeof t_bits);
  const I32x16 ni = t_bits - 0x4b400000;  // the bits of kRound
  const I32x16 n1 = ni >> 1;
  const I32x16 n2 = ni - n1;
  const I32x16 s1_bits = (n1 + 127) << 23;
  const I32x16 s2_bits = (n2 + 127) << 23;
  F32x16 s1, s2;
  std::memcpy(&s1, &s1_bits, sizeof s1);
  std::memcpy(&s2, &s2_bits, sizeof s2);
  return p * s1 * s2;
}

}  // namespace
}  // namespace tern::cpu
