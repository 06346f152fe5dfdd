// IEEE half (f16) and bfloat16 conversions. F16C instructions when the build targets them
// (aarch64's fcvt always), else exact bit manipulation (round to nearest even), so results
// never depend on the path.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace tern {
// Internal linkage: the kernels of each instruction set (kernels/cpu/arch/x86/<level>/) are
// compiled with their own flags, and an inline function with external linkage would let the linker
// keep one TU's copy (say, with AVX-512 instructions) for all of them.
namespace {

inline float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

inline float f16_to_f32_scalar(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {
    // inf, or nan made quiet as the F16C instruction does
    return bits_to_f32(sign | 0x7f800000u | (mant != 0 ? 0x400000u : 0u) | (mant << 13));
  }
  if (exp == 0) {
    if (mant == 0) return bits_to_f32(sign);
    // subnormal: value = mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_to_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t f32_to_f16_scalar(float f) {
  uint32_t x = f32_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // nan
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow → inf
  if (x < 0x38800000u) {
    // subnormal or zero in f16: round mant * 2^-24 to nearest even
    float v = bits_to_f32(x) * 16777216.0f;  // * 2^24
    uint32_t m = static_cast<uint32_t>(v);
    float rem = v - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  // normal: rebias exponent, round mantissa to 10 bits, nearest even
  uint32_t mant_odd = (x >> 13) & 1u;
  x += 0xc8000fffu + mant_odd;  // (-112 << 23) + rounding bias
  return static_cast<uint16_t>(sign | (x >> 13));
}

inline float f16_to_f32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#elif defined(__aarch64__)
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
#else
  return f16_to_f32_scalar(h);
#endif
}

inline uint16_t f32_to_f16(float f) {
#if defined(__F16C__)
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#elif defined(__aarch64__)
  return vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(f))), 0);
#else
  return f32_to_f16_scalar(f);
#endif
}

inline float bf16_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);                    // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace
}  // namespace tern
