// Row quantizers and dequantizers of ggml's block formats (scalar): what `tern quantize`,
// `--load-format dummy` and the activation side of every quantized matmul use.
#pragma once

#include <cstdint>

#include "tern/core/dtype.h"

namespace tern {

// k: row length in elements, a multiple of the type's block size (32 or 256; 1 for floats).
// x: [k] floats; y: dtype_bytes(dtype, k) bytes.
using QuantizeFn = void (*)(const float* x, void* y, int64_t k);
using DequantizeFn = void (*)(const void* x, float* y, int64_t k);

// Types with a quantizer and a dequantizer: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, MXFP4, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M,
// F16, BF16, F32, INT4_G* and INT8_G*. Both throw tern::Error for other types. The lattice types'
// quantizers are lattice_fit.h's searches without an importance matrix (slow: a grid search per
// group; fine for dummy weights and tests, not for activations).
QuantizeFn quantize_fn(DType dtype);
DequantizeFn dequantize_fn(DType dtype);
bool has_quantizer(DType dtype);
bool has_dequantizer(DType dtype);

// Throw tern::Error when k is not a whole number of blocks or the type is not supported.
void quantize_row(DType dtype, const float* x, void* y, int64_t k);
void dequantize_row(DType dtype, const void* x, float* y, int64_t k);

// Throws tern::Error when k is not a whole number of `dtype`'s blocks (what quantize_row and
// dequantize_row check; the CPU's quantize_rows checks it once for all its rows).
void check_whole_blocks(DType dtype, int64_t k);

// The 8-bit activation formats (Q8_0, Q8_1, Q8_K) keep every quant in [-127, 127], never -128:
// SIMD dots may rely on it (sign tricks with _mm256_sign_epi8, |q| fitting in 7 bits).

}  // namespace tern
