// The F32x16 policy (ops/lanes16.h) in NEON registers, four float32x4 per F32x16, and the
// kernels the dispatch table takes from this level (every ARM level runs them) that are built
// on it: attention's work items (ops/attention_run.h) and the SiLU·up rows (ops/silu_row.h).
// Every operation gives the scalar twin's bits: a fused multiply-add rounds once either way,
// widening f16 is exact.
#include <arm_neon.h>

#include <cstring>

#include "tern/kernels/cpu/ops/attention_run.h"
#include "tern/kernels/cpu/ops/lanes16.h"
#include "tern/kernels/cpu/ops/row_ops.h"
#include "tern/kernels/cpu/ops/silu_row.h"

namespace tern::cpu {
namespace {

struct NeonF32x16 : WidenThroughLoads<NeonF32x16> {
  static F32x16 fma16(F32x16 a, F32x16 b, F32x16 c) {
    float32x4_t a4[4], b4[4], c4[4];
    std::memcpy(a4, &a, sizeof a), std::memcpy(b4, &b, sizeof b), std::memcpy(c4, &c, sizeof c);
    for (int q = 0; q < 4; ++q) c4[q] = vfmaq_f32(c4[q], a4[q], b4[q]);
    std::memcpy(&c, c4, sizeof c);
    return c;
  }
  static F32x16 load16_f16(const uint16_t* p) {
    float32x4_t q[4];
    for (int i = 0; i < 4; ++i) q[i] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p + 4 * i)));
    F32x16 v;
    std::memcpy(&v, q, sizeof v);
    return v;
  }
};

}  // namespace

AttentionKernels neon_attention_kernels() { return attention_kernels_of<NeonF32x16>(); }

void neon_silu_mul_row(const float* gate, const float* up, float* out, int64_t n) {
  silu_mul_row<NeonF32x16>(gate, up, out, n);
}

}  // namespace tern::cpu
