// The 8-bit KV cache's conversions: a head row of f32 into 8-bit codes and one f16 scale as
// the cache stores it (KvCache::write), and back to f32 for attention. Dequantizing is per ISA
// (arch/x86/{avx2,avx512}/kv_dequant.cpp) with the scalar code here as the twin each is tested
// against; all three give the same bits, since a code's value and the product with its scale are
// exact or rounded once.
#pragma once

#include <cstdint>

#include "tern/kernels/cpu/kv/kv_dtype.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {

// FP8 codes (OCP's E4M3 without infinities, largest 448; E5M2, largest finite 57344):
// round to nearest even, saturating at the largest finite value (as vLLM's conversion does).
uint8_t f32_to_fp8_e4m3(float x);
uint8_t f32_to_fp8_e5m2(float x);
float fp8_e4m3_to_f32(uint8_t code);
float fp8_e5m2_to_f32(uint8_t code);

// Quantizes one kv head's row: scale = f16(max|x| / largest code value), codes = x / scale
// rounded (int8: to nearest even, |q| ≤ 127). For FP8 rows shorter than 256 the scale is the
// best (least squared error) of up to 32 within one octave above that, so nothing saturates.
// An all-zero row gets scale 0 and zero codes; a row holding NaN or ±inf gets a NaN scale
// (attention then gives NaN, as an f16 cache would). dtype: Int8, Fp8E4M3 or Fp8E5M2. x: [n];
// codes: [n]
void quantize_kv_head(KvDtype dtype, const float* x, int n, uint8_t* codes, uint16_t* scale);

// out[i] = value(codes[i]) · scale, for the scaled dtypes.
// codes: [n]; out: [n]
using KvDequantizeFn = void (*)(const uint8_t* codes, float scale, float* out, int n);

// The dequantizer of `dtype` (Int8, Fp8E4M3, Fp8E5M2) at `isa` (Amx uses Avx512's, Dotprod
// and I8mm Neon's); throws
// tern::Error for another dtype or an ISA this CPU lacks.
KvDequantizeFn kv_dequantize_fn(KvDtype dtype, Isa isa);
inline KvDequantizeFn kv_dequantize_fn(KvDtype dtype) {
  return kv_dequantize_fn(dtype, best_isa());
}

// One ISA's three dequantizers, picked by dtype (nullptr for the unscaled dtypes).
inline KvDequantizeFn select_kv_dequantize(KvDtype dtype, KvDequantizeFn int8, KvDequantizeFn e4m3,
                                           KvDequantizeFn e5m2) {
  return dtype == KvDtype::Int8      ? int8
         : dtype == KvDtype::Fp8E4M3 ? e4m3
         : dtype == KvDtype::Fp8E5M2 ? e5m2
                                     : nullptr;
}

// The scalar twins (kv_quant.cpp), which the others are tested against.
KvDequantizeFn scalar_kv_dequantize(KvDtype dtype);
// Per ISA, nullptr for a dtype the file does not cover (arch/x86/{avx2,avx512}/kv_dequant.cpp,
// arch/arm/neon/kv_dequant.cpp: every ARM level).
KvDequantizeFn avx2_kv_dequantize(KvDtype dtype);
KvDequantizeFn avx512_kv_dequantize(KvDtype dtype);
KvDequantizeFn neon_kv_dequantize(KvDtype dtype);

}  // namespace tern::cpu
