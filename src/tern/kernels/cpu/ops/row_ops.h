// Element-wise and per-row operators of the decoder: RMS norm, SiLU·up, softmax, residual add,
// and f32 ⇄ f16/bf16 row conversions. Every output row depends only on its own input row, and
// every reduction runs in a fixed order, so results never depend on the batch or thread count.
#pragma once

#include <cstdint>

namespace tern::cpu {

enum class Isa;  // vec_dot.h

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) * weight[:]; the sum of squares is taken in
// double. out may alias x.
// x, out: [rows, dim]; weight: [dim]
// (Qwen3's q/k norms are this with rows = num_tokens * n_heads, dim = head_dim.)
void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
              float* out);

// out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x). out may alias gate or up.
// gate, up, out: [n]
void silu_mul(const float* gate, const float* up, float* out, int64_t n);

// gpt-oss's experts' activation: with g = min(gate[i], limit) and u = clamp(up[i], -limit,
// limit), out[i] = g · sigmoid(1.702 g) · (u + 1). One scalar loop for every level (its cost, a
// few experts' widths per token, is nothing beside their weights). out may alias gate or up.
// gate, up, out: [n]
void clamped_swiglu(const float* gate, const float* up, float* out, int64_t n, float limit);

// Gemma's GeGLU: out[i] = gelu_tanh(gate[i]) · up[i], gelu_tanh(x) = 0.5 x (1 + tanh(√(2/π)
// (x + 0.044715 x³))) (PyTorch's gelu(approximate="tanh")). One scalar loop for every level, tanh
// in double. out may alias gate or up. gate, up, out: [n]
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);

// silu_mul and gelu_tanh_mul on a fused gate_up projection, whose row holds gate then up
// (vLLM's MergedColumnParallelLinear layout); each output equals the unfused op's bit for bit.
// gate_up: [rows, 2 * dim]; out: [rows, dim]
void silu_mul_fused(const float* gate_up, int64_t rows, int64_t dim, float* out);
void gelu_tanh_mul_fused(const float* gate_up, int64_t rows, int64_t dim, float* out);

// out[i] = a[i] + b[i] (the residual connection); out may alias a or b.
// a, b, out: [n]
void add(const float* a, const float* b, float* out, int64_t n);

// Softmax of each row, in place: exp(x - max) / sum, the sum taken in double. A row whose
// entries are all -inf (everything masked) becomes all zeros rather than NaN.
// x: [rows, n]
void softmax(float* x, int64_t rows, int64_t n);

// log(softmax(x)) of each row, in place (for logprobs). An all -inf row stays -inf.
// x: [rows, n]
void log_softmax(float* x, int64_t rows, int64_t n);

// Row conversions between f32 and the 16-bit types of weights and the KV cache. Conversion to
// f32 is exact; to f16/bf16 rounds to nearest even. The f16 ones run the best level's kernels
// (f16_row_kernels), which give bit-identical results to the scalar twins.
void f16_to_f32_row(const uint16_t* x, float* out, int64_t n);
void f32_to_f16_row(const float* x, uint16_t* out, int64_t n);
void bf16_to_f32_row(const uint16_t* x, float* out, int64_t n);
void f32_to_bf16_row(const float* x, uint16_t* out, int64_t n);

// The scalar twins of the row conversions (tests compare against them).
void f16_to_f32_row_scalar(const uint16_t* x, float* out, int64_t n);
void f32_to_f16_row_scalar(const float* x, uint16_t* out, int64_t n);

// One row of silu_mul, per level as the dispatch table (op_kernels, kernel_table.h) holds it:
// ops/silu_row.h compiled with each level's F32x16 policy, the scalar twin in row_ops.cpp and
// arch/x86/{avx2,avx512}/f32x16.cpp, arch/arm/neon/f32x16.cpp (every ARM level). All give the
// same bits. gate, up, out: [n]
using SiluMulRowFn = void (*)(const float* gate, const float* up, float* out, int64_t n);
void silu_mul_row_scalar(const float* gate, const float* up, float* out, int64_t n);
void avx2_silu_mul_row(const float* gate, const float* up, float* out, int64_t n);
void avx512_silu_mul_row(const float* gate, const float* up, float* out, int64_t n);
void neon_silu_mul_row(const float* gate, const float* up, float* out, int64_t n);

// The f16 row conversions of one ISA level (the scalar twins for Scalar), as the dispatch table
// (op_kernels, kernel_table.h) holds them. Attention converts a K and a V row per key, and GCC 12
// does not vectorise f16 conversions on its own, so the levels spell them out:
// arch/x86/avx2/f16_rows.cpp (F16C), arch/x86/avx512/f16_rows.cpp, arch/arm/neon/f16_rows.cpp
// (fcvtl, fcvtn: every ARM level).
struct F16RowKernels {
  void (*to_f32)(const uint16_t* x, float* out, int64_t n);
  void (*from_f32)(const float* x, uint16_t* out, int64_t n);
};
F16RowKernels f16_row_kernels(Isa isa);
void avx2_f16_to_f32_row(const uint16_t* x, float* out, int64_t n);
void avx2_f32_to_f16_row(const float* x, uint16_t* out, int64_t n);
void avx512_f16_to_f32_row(const uint16_t* x, float* out, int64_t n);
void avx512_f32_to_f16_row(const float* x, uint16_t* out, int64_t n);
void neon_f16_to_f32_row(const uint16_t* x, float* out, int64_t n);
void neon_f32_to_f16_row(const float* x, uint16_t* out, int64_t n);

}  // namespace tern::cpu
