// AVX2 dot kernels of the float weight types (F32 and BF16 with activations of the same type,
// F16 with f32 activations): widen to f32, four independent FMA accumulators, one horizontal
// sum at the end.
#include <immintrin.h>

#include "tern/core/half.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

__m256 load_f32(const float* p) { return _mm256_loadu_ps(p); }
__m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
__m256 load_bf16(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// W, A: the weight and activation elements, LoadW / LoadA widen 8 of them, WToF32 / AToF32 one.
template <typename W, typename A, __m256 (*LoadW)(const W*), __m256 (*LoadA)(const A*),
          float (*WToF32)(W), float (*AToF32)(A)>
float dot(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const W*>(vw);
  const auto* a = static_cast<const A*>(va);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    acc0 = _mm256_fmadd_ps(LoadW(w + i), LoadA(a + i), acc0);
    acc1 = _mm256_fmadd_ps(LoadW(w + i + 8), LoadA(a + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(LoadW(w + i + 16), LoadA(a + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(LoadW(w + i + 24), LoadA(a + i + 24), acc3);
  }
  for (; i + 8 <= k; i += 8) acc0 = _mm256_fmadd_ps(LoadW(w + i), LoadA(a + i), acc0);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < k; ++i) sum += WToF32(w[i]) * AToF32(a[i]);
  return sum;
}

float identity(float x) { return x; }
float from_f16(uint16_t h) { return f16_to_f32(h); }
float from_bf16(uint16_t h) { return bf16_to_f32(h); }

}  // namespace

VecDotFn avx2_vec_dot_float(DType weight) {
  switch (weight) {
    case DType::F32:
      return dot<float, float, load_f32, load_f32, identity, identity>;
    case DType::F16:
      return dot<uint16_t, float, load_f16, load_f32, from_f16, identity>;
    case DType::BF16:
      return dot<uint16_t, uint16_t, load_bf16, load_bf16, from_bf16, from_bf16>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
