// f32 ⇄ f16 rows with F16C, 8 per step. GCC 12 does not vectorise f16 conversions on its own,
// and attention converts a K and a V row per key. vcvtph2ps is exact and vcvtps2ph rounds to
// nearest even, like the scalar twins in ops/row_ops.cpp.
#include <immintrin.h>

#include "tern/core/half.h"
#include "tern/kernels/cpu/ops/row_ops.h"

namespace tern::cpu {

void avx2_f16_to_f32_row(const uint16_t* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = f16_to_f32(x[i]);
}

void avx2_f32_to_f16_row(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = f32_to_f16(x[i]);
}

}  // namespace tern::cpu
