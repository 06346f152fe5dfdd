// AVX2 dequantizers of the 8-bit KV cache, 8 codes per step; the same widening as the AVX-512
// file (see there) with F16C's vcvtph2ps.
#include <immintrin.h>

#include "tern/kernels/cpu/kv/kv_quant.h"

namespace tern::cpu {
namespace {

__m128i widen8(const uint8_t* p) {
  return _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

void dequantize_int8(const uint8_t* codes, float scale, float* out, int n) {
  const __m256 s = _mm256_set1_ps(scale);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i q =
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtepi32_ps(q), s));
  }
  for (; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(codes[i])) * scale;
}

void dequantize_e4m3(const uint8_t* codes, float scale, float* out, int n) {
  const __m256 s = _mm256_set1_ps(scale * 256.0f);
  const __m128i magnitude = _mm_set1_epi16(0x7f), sign = _mm_set1_epi16(0x80);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i w = widen8(codes + i);
    const __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(w, magnitude), 7),
                                   _mm_slli_epi16(_mm_and_si128(w, sign), 8));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtph_ps(h), s));
  }
  for (; i < n; ++i) out[i] = fp8_e4m3_to_f32(codes[i]) * scale;
}

void dequantize_e5m2(const uint8_t* codes, float scale, float* out, int n) {
  const __m256 s = _mm256_set1_ps(scale);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_slli_epi16(widen8(codes + i), 8);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtph_ps(h), s));
  }
  for (; i < n; ++i) out[i] = fp8_e5m2_to_f32(codes[i]) * scale;
}

}  // namespace

KvDequantizeFn avx2_kv_dequantize(KvDtype dtype) {
  return select_kv_dequantize(dtype, dequantize_int8, dequantize_e4m3, dequantize_e5m2);
}

}  // namespace tern::cpu
