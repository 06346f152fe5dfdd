// NEON dequantizers of the 8-bit KV cache, 8 codes per step, bit for bit the scalar twins
// (blocks/kv_row_format.cpp): int8 codes widen to int32 and convert exactly; an fp8 code is the top
// of an f16 (e5m2: its high byte; e4m3: its bits shifted into f16's, the exponent bias fixed by the
// scale's factor 2^8), widened exactly by fcvtl, then one multiply by the scale.
#include <arm_neon.h>

#include "tern/kernels/cpu/kv/kv_quant.h"

namespace tern::cpu {
namespace {

void dequantize_int8(const uint8_t* codes, float scale, float* out, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const int16x8_t q = vmovl_s8(vld1_s8(reinterpret_cast<const int8_t*>(codes + i)));
    vst1q_f32(out + i, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(q))), scale));
    vst1q_f32(out + i + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(q)), scale));
  }
  for (; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(codes[i])) * scale;
}

// 8 f16 bit patterns widened to floats and multiplied by s.
inline void store_f16_times(float* out, uint16x8_t h, float s) {
  const float16x8_t f = vreinterpretq_f16_u16(h);
  vst1q_f32(out, vmulq_n_f32(vcvt_f32_f16(vget_low_f16(f)), s));
  vst1q_f32(out + 4, vmulq_n_f32(vcvt_high_f32_f16(f), s));
}

void dequantize_e4m3(const uint8_t* codes, float scale, float* out, int n) {
  const float s = scale * 256.0f;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint16x8_t w = vmovl_u8(vld1_u8(codes + i));
    const uint16x8_t h = vorrq_u16(vshlq_n_u16(vandq_u16(w, vdupq_n_u16(0x7f)), 7),
                                   vshlq_n_u16(vandq_u16(w, vdupq_n_u16(0x80)), 8));
    store_f16_times(out + i, h, s);
  }
  for (; i < n; ++i) out[i] = fp8_e4m3_to_f32(codes[i]) * scale;
}

void dequantize_e5m2(const uint8_t* codes, float scale, float* out, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) store_f16_times(out + i, vshll_n_u8(vld1_u8(codes + i), 8), scale);
  for (; i < n; ++i) out[i] = fp8_e5m2_to_f32(codes[i]) * scale;
}

}  // namespace

KvDequantizeFn neon_kv_dequantize(KvDtype dtype) {
  return select_kv_dequantize(dtype, dequantize_int8, dequantize_e4m3, dequantize_e5m2);
}

}  // namespace tern::cpu
