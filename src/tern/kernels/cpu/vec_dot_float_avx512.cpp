// AVX-512 dot kernels of the float weight types: F32 and F16 widen to f32 and use FMA;
// BF16 uses vdpbf16ps (32 products per instruction, exact bf16 products, f32 sums). Tails are
// masked loads, so no scalar remainder loop.
// GCC 12's own AVX-512 headers fill "undefined" vectors by self-initialisation, which its
// -Wuninitialized flags wherever such an intrinsic is inlined (_mm512_cvtph_ps, the reduces).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

__mmask16 tail_mask16(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
__mmask32 tail_mask32(int64_t n) { return static_cast<__mmask32>((1ull << n) - 1ull); }

float dot_f32(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const float*>(vw);
  const auto* a = static_cast<const float*>(va);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(a + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(a + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 32), _mm512_loadu_ps(a + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 48), _mm512_loadu_ps(a + i + 48), acc3);
  }
  for (; i + 16 <= k; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(a + i), acc0);
  if (i < k) {
    const __mmask16 m = tail_mask16(k - i);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, a + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

__m512 load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

float dot_f16(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const uint16_t*>(va);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    acc0 = _mm512_fmadd_ps(load_f16(w + i), load_f16(a + i), acc0);
    acc1 = _mm512_fmadd_ps(load_f16(w + i + 16), load_f16(a + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(load_f16(w + i + 32), load_f16(a + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(load_f16(w + i + 48), load_f16(a + i + 48), acc3);
  }
  for (; i + 16 <= k; i += 16) acc0 = _mm512_fmadd_ps(load_f16(w + i), load_f16(a + i), acc0);
  if (i < k) {
    const __mmask16 m = tail_mask16(k - i);
    acc1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + i)),
                           _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i)), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

__m512bh load_bf16(const uint16_t* p) { return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p)); }

float dot_bf16(int64_t k, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const uint16_t*>(va);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 128 <= k; i += 128) {
    acc0 = _mm512_dpbf16_ps(acc0, load_bf16(w + i), load_bf16(a + i));
    acc1 = _mm512_dpbf16_ps(acc1, load_bf16(w + i + 32), load_bf16(a + i + 32));
    acc2 = _mm512_dpbf16_ps(acc2, load_bf16(w + i + 64), load_bf16(a + i + 64));
    acc3 = _mm512_dpbf16_ps(acc3, load_bf16(w + i + 96), load_bf16(a + i + 96));
  }
  for (; i + 32 <= k; i += 32) acc0 = _mm512_dpbf16_ps(acc0, load_bf16(w + i), load_bf16(a + i));
  if (i < k) {
    const __mmask32 m = tail_mask32(k - i);
    acc1 = _mm512_dpbf16_ps(acc1, reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, w + i)),
                            reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, a + i)));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

}  // namespace

VecDotFn avx512_vec_dot_float(DType weight) {
  switch (weight) {
    case DType::F32: return dot_f32;
    case DType::F16: return dot_f16;
    case DType::BF16: return dot_bf16;
    default: return nullptr;
  }
}

}  // namespace tern::cpu
