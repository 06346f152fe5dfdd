// f32 ⇄ f16 rows on NEON, 8 per step (fcvtl / fcvtn, round to nearest even); the tail one at a
// time through the same instructions (core/half.h).
#include <arm_neon.h>

#include "tern/core/half.h"
#include "tern/kernels/cpu/ops/row_ops.h"

namespace tern::cpu {

void neon_f16_to_f32_row(const uint16_t* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(x + i));
    vst1q_f32(out + i, vcvt_f32_f16(vget_low_f16(h)));
    vst1q_f32(out + i + 4, vcvt_high_f32_f16(h));
  }
  for (; i < n; ++i) out[i] = f16_to_f32(x[i]);
}

void neon_f32_to_f16_row(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(x + i)), vld1q_f32(x + i + 4));
    vst1q_u16(out + i, vreinterpretq_u16_f16(h));
  }
  for (; i < n; ++i) out[i] = f32_to_f16(x[i]);
}

}  // namespace tern::cpu
