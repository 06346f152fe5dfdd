// The F32x16 policy (ops/lanes16.h) in AVX-512 registers, one zmm per F32x16, and the kernels
// the dispatch table takes from this level that are built on it: attention's work items
// (ops/attention_run.h) and the SiLU·up rows (ops/silu_row.h). Every operation gives the scalar
// twin's bits: a fused multiply-add rounds once either way, widening f16 is exact.
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/ops/attention_run.h"
#include "tern/kernels/cpu/ops/lanes16.h"
#include "tern/kernels/cpu/ops/row_ops.h"
#include "tern/kernels/cpu/ops/silu_row.h"

namespace tern::cpu {
namespace {

struct Avx512F32x16 {
  static F32x16 fma16(F32x16 a, F32x16 b, F32x16 c) {
    return reinterpret_cast<F32x16>(_mm512_fmadd_ps(
        reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(b), reinterpret_cast<__m512>(c)));
  }
  static F32x16 load16_f16(const uint16_t* p) {
    return reinterpret_cast<F32x16>(
        _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  }
  static F32x16 f16x16_to_f32(U16x16 h) {
    return reinterpret_cast<F32x16>(_mm512_maskz_cvtph_ps(0xffff, reinterpret_cast<__m256i>(h)));
  }
  // GCC scalarizes the vector extensions' byte conversions (vector_codes16), so the codes
  // widen with intrinsics: int8 to int32 to float, FP8 to the f16 bits vector_codes16 makes.
  template <KvDtype D>
  static F32x16 codes16(const uint8_t* p) {
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (D == KvDtype::Int8) {
      return reinterpret_cast<F32x16>(
          _mm512_maskz_cvtepi32_ps(0xffff, _mm512_maskz_cvtepi8_epi32(0xffff, c)));
    } else {
      const __m256i w = _mm256_cvtepu8_epi16(c);
      __m256i h;
      if constexpr (D == KvDtype::Fp8E5M2) {
        h = _mm256_slli_epi16(w, 8);
      } else {
        h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7f)), 7),
                            _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8));
      }
      return reinterpret_cast<F32x16>(_mm512_maskz_cvtph_ps(0xffff, h));
    }
  }
};

}  // namespace

AttentionKernels avx512_attention_kernels() { return attention_kernels_of<Avx512F32x16>(); }

void avx512_silu_mul_row(const float* gate, const float* up, float* out, int64_t n) {
  silu_mul_row<Avx512F32x16>(gate, up, out, n);
}

}  // namespace tern::cpu
