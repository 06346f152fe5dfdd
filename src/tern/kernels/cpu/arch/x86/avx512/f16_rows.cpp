// f32 ⇄ f16 rows with AVX-512, 16 per step; the AVX2 form (avx2/f16_rows.cpp) takes the tail.
// The maskz forms: GCC 12 warns about the plain ones' undefined pass-through.
#include <immintrin.h>

#include "tern/kernels/cpu/ops/row_ops.h"

namespace tern::cpu {

void avx512_f16_to_f32_row(const uint16_t* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    _mm512_storeu_ps(out + i, _mm512_maskz_cvtph_ps(0xffff, h));
  }
  avx2_f16_to_f32_row(x + i, out + i, n - i);
}

void avx512_f32_to_f16_row(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h =
        _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), h);
  }
  avx2_f32_to_f16_row(x + i, out + i, n - i);
}

}  // namespace tern::cpu
