// Dot products of one weight row with one activation row, per weight type, with the
// activation quantized to the format that type's integer dot wants (llama.cpp's scheme:
// Q4_0/Q5_0/Q8_0 → Q8_0, Q4_1/Q5_1 → Q8_1, K types → Q8_K), or for float weights the format
// their dot reads best: F16 → F32 (only the weight is converted), BF16 → BF16, F32 → F32.
//
// Batch invariance rests here: every output element of a matmul is one call of `vec_dot`
// (or a tile kernel that does the same arithmetic in the same order), so a row's result never
// depends on how many rows share the call or on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tern/core/dtype.h"

namespace tern::cpu {

// Instruction-set levels with their own kernels; each SIMD level is tested against Scalar.
// The levels form one chain per architecture, each level building on its parent: a type a
// level has no kernels for runs its parent's.
//   x86-64:  Scalar → Avx2 → Avx512 → Amx. Amx is Avx512 plus AMX-INT8 tiles (and the OS's
//            permission to use them).
//   aarch64: Scalar → Neon → Dotprod → I8mm. Neon is ARMv8's Advanced SIMD (every aarch64
//            Linux CPU has it), Dotprod adds sdot (asimddp), I8mm adds smmla.
// The 16-chain arithmetic (generic/vec_dot_16lane.cpp: Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, and
// 16-lane sums for F32, F16 and BF16) is what both AVX-512 levels compute and every ARM level
// reproduces bit for bit, so outputs on ARM equal those on an AVX-512 x86 machine.
enum class Isa { Scalar, Avx2, Avx512, Amx, Neon, Dotprod, I8mm };
inline constexpr int kNumIsas = 7;
const char* isa_name(Isa isa);
// The level `isa` builds on (Scalar's is Scalar).
Isa isa_parent(Isa isa);
// True when `isa` is `level` or builds on it (Amx includes Avx2; I8mm includes Neon).
bool isa_includes(Isa isa, Isa level);
// This build's levels from Scalar up: x86-64's or aarch64's chain (Scalar alone elsewhere).
const std::vector<Isa>& isa_levels();
// The best level this CPU runs (CPUID + OS support on x86-64, the kernel's HWCAPs on aarch64),
// honouring TERN_ISA=<level name> to force a lower one of the same chain. Decided once per
// process.
Isa best_isa();
bool isa_supported(Isa isa);
// Throws tern::Error when TERN_ISA names no level this CPU runs (best_isa would quietly keep
// the detected one), naming the ones it does: for a command to refuse before it starts.
void check_isa_request();

// k: row length in elements (a multiple of the weight type's block size).
using QuantizeRowFn = void (*)(const float* x, void* y, int64_t k);
using VecDotFn = float (*)(int64_t k, const void* w_row, const void* a_row);

// A tile of a matmul in one call: y[i * ldy + r] = vec_dot(k, w + r * w_stride, a + i * a_stride)
// for r < rows, i < tokens, bit for bit, but with each weight block unpacked once for several
// tokens and each activation block loaded once for several rows.
// w: [rows, w_stride bytes], a: [tokens, a_stride bytes], y: [tokens, ldy floats].
using GemmTileFn = void (*)(int64_t k, const void* w, size_t w_stride, int64_t rows, const void* a,
                            size_t a_stride, int64_t tokens, float* y, size_t ldy);

// kVecDotRows rows against one activation row in one call: out[r] = vec_dot(k, w_rows[r], a)
// bit for bit, wherever the rows lie. The GEMV (matmul.cpp) reads its streams through it side
// by side, each activation chunk loaded once for all of them.
constexpr int kVecDotRows = 4;
using VecDotRowsFn = void (*)(int64_t k, const void* const* w_rows, const void* a_row, float* out);

// Kernels that read a weight matrix rearranged once at load, in a level's own layout, instead
// of the file's rows (both AVX-512 levels' Q4_0 and Q8_0: 16-row groups, avx512/q_layout.h).
struct PackedKernels {
  // Rows per group of the layout: packed copies of matrices whose rows are multiples of it,
  // laid back to back, are the packed copy of the matrices stacked (a fused q/k/v).
  int64_t row_group;
  // Bytes of the packed copy of `rows` rows of `k` elements.
  size_t (*bytes)(int64_t rows, int64_t k);
  // w: [rows, w_stride bytes] in the file's layout → out: bytes(rows, k), 64-byte aligned.
  void (*pack)(const void* w, size_t w_stride, int64_t rows, int64_t k, void* out);
  // The whole matmul on the packed weights, any number of tokens, threads inside: every
  // element bit for bit the level's vec_dot of the original row.
  void (*matmul)(int64_t k, const void* packed, int64_t rows, const void* a, size_t a_stride,
                 int64_t tokens, float* y, size_t ldy);
};

struct TypeKernels {
  DType weight;
  DType activation;
  QuantizeRowFn quantize_activation;  // f32 row → activation row
  VecDotFn vec_dot;
  VecDotRowsFn vec_dot_rows = nullptr;  // nullptr: the GEMV calls vec_dot per row
  GemmTileFn gemm_tile;                 // nullptr: the matmul calls vec_dot per output element
  // The whole matmul of T > 1 tokens in one call (called with every row and token), threads
  // inside: for kernels that prepare the activations once per call (avx512/q_packed.h,
  // amx/gemm_k.cpp). Same contract as gemm_tile; preferred to it where both are set.
  GemmTileFn gemm = nullptr;
  const PackedKernels* packed = nullptr;  // nullptr: this level reads the file's rows in place
};

// Throws tern::Error when tern has no kernels for the type (e.g. Q2_K) or the ISA is not
// supported by this CPU.
const TypeKernels& type_kernels(DType weight, Isa isa);
inline const TypeKernels& type_kernels(DType weight) { return type_kernels(weight, best_isa()); }

}  // namespace tern::cpu
