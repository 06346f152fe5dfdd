// AVX-512 dequantizers of the 8-bit KV cache, 16 codes per step. FP8 codes widen to IEEE half
// by shifting their bits (E5M2 is the top byte of a half; E4M3 shifted into a half's fields is
// its value · 2⁻⁸, subnormals included, so the 2⁸ goes into the scale) and then to f32 with
// vcvtph2ps: every step exact but the one multiply by the scale, as in the scalar twin.
#include <immintrin.h>

#include "tern/kernels/cpu/kv/kv_quant.h"

namespace tern::cpu {
namespace {

__m256i widen16(const uint8_t* p) {
  return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

void dequantize_int8(const uint8_t* codes, float scale, float* out, int n) {
  const __m512 s = _mm512_set1_ps(scale);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    // The maskz forms: GCC 12 warns about the plain ones' undefined pass-through.
    const __m512i q = _mm512_maskz_cvtepi8_epi32(
        0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xffff, q), s));
  }
  for (; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(codes[i])) * scale;
}

void dequantize_e4m3(const uint8_t* codes, float scale, float* out, int n) {
  const __m512 s = _mm512_set1_ps(scale * 256.0f);
  const __m256i magnitude = _mm256_set1_epi16(0x7f), sign = _mm256_set1_epi16(0x80);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i w = widen16(codes + i);
    const __m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(w, magnitude), 7),
                                      _mm256_slli_epi16(_mm256_and_si256(w, sign), 8));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_maskz_cvtph_ps(0xffff, h), s));
  }
  for (; i < n; ++i) out[i] = fp8_e4m3_to_f32(codes[i]) * scale;
}

void dequantize_e5m2(const uint8_t* codes, float scale, float* out, int n) {
  const __m512 s = _mm512_set1_ps(scale);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_slli_epi16(widen16(codes + i), 8);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_maskz_cvtph_ps(0xffff, h), s));
  }
  for (; i < n; ++i) out[i] = fp8_e5m2_to_f32(codes[i]) * scale;
}

}  // namespace

KvDequantizeFn avx512_kv_dequantize(KvDtype dtype) {
  return select_kv_dequantize(dtype, dequantize_int8, dequantize_e4m3, dequantize_e5m2);
}

}  // namespace tern::cpu
