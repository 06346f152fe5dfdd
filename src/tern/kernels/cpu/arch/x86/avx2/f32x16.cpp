// The F32x16 policy (ops/lanes16.h) in AVX2 registers, two ymm per F32x16 (FMA, F16C), and the
// kernels the dispatch table takes from this level that are built on it: attention's work
// items (ops/attention_run.h) and the SiLU·up rows (ops/silu_row.h). Every operation gives the
// scalar twin's bits: a fused multiply-add rounds once either way, widening f16 is exact.
// GCC warns that a 64-byte vector is returned differently without AVX-512; every function here
// and in ops/lanes16.h has internal linkage, so no such value crosses to a file of other flags.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <immintrin.h>

#include <cstring>

#include "tern/kernels/cpu/ops/attention_run.h"
#include "tern/kernels/cpu/ops/lanes16.h"
#include "tern/kernels/cpu/ops/row_ops.h"
#include "tern/kernels/cpu/ops/silu_row.h"

namespace tern::cpu {
namespace {

struct Avx2F32x16 : WidenThroughLoads<Avx2F32x16> {
  static F32x16 fma16(F32x16 a, F32x16 b, F32x16 c) {
    __m256 a2[2], b2[2], c2[2];
    std::memcpy(a2, &a, sizeof a), std::memcpy(b2, &b, sizeof b), std::memcpy(c2, &c, sizeof c);
    for (int h = 0; h < 2; ++h) c2[h] = _mm256_fmadd_ps(a2[h], b2[h], c2[h]);
    std::memcpy(&c, c2, sizeof c);
    return c;
  }
  static F32x16 load16_f16(const uint16_t* p) {
    const __m256 lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256 hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
    F32x16 v;
    std::memcpy(&v, &lo, sizeof lo);
    std::memcpy(reinterpret_cast<char*>(&v) + sizeof lo, &hi, sizeof hi);
    return v;
  }
};

}  // namespace

AttentionKernels avx2_attention_kernels() { return attention_kernels_of<Avx2F32x16>(); }

void avx2_silu_mul_row(const float* gate, const float* up, float* out, int64_t n) {
  silu_mul_row<Avx2F32x16>(gate, up, out, n);
}

}  // namespace tern::cpu
