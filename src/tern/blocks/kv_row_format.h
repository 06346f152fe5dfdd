// The 8-bit KV cache rows (kv_dtype.h): a head row of f32 into 8-bit codes and one f16 scale as
// the cache stores it, and the scalar conversions back to f32, which define the format. The CPU
// backend's per-ISA dequantizers (kernels/cpu/kv/kv_quant.h) are tested against these; all give
// the same bits, since a code's value and the product with its scale are exact or rounded once.
#pragma once

#include <cstdint>

#include "tern/blocks/kv_dtype.h"

namespace tern {

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

// The scalar dequantizers of Int8, Fp8E4M3 and Fp8E5M2 rows (KvDequantizeFn's).
void dequantize_kv_int8(const uint8_t* codes, float scale, float* out, int n);
void dequantize_kv_e4m3(const uint8_t* codes, float scale, float* out, int n);
void dequantize_kv_e5m2(const uint8_t* codes, float scale, float* out, int n);

}  // namespace tern
