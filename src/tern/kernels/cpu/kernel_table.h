// The dispatch table of every kernel family with ISA variants: the matmul's, one row per
// (weight type, ISA level), and the other ops', one row per level (OpKernels); a level that has
// no kernels of its own for a type or op inherits the row of the level below. type_kernels
// (vec_dot.h) reads it; kernel_matrix prints the matmul's, so nobody has to simulate dispatch.
#pragma once

#include <string>

#include "tern/core/dtype.h"
#include "tern/kernels/cpu/kv/kv_quant.h"
#include "tern/kernels/cpu/memory_read.h"
#include "tern/kernels/cpu/ops/attention_item.h"
#include "tern/kernels/cpu/ops/row_ops.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {

struct KernelRow {
  TypeKernels kernels;  // vec_dot == nullptr: tern has no kernels for the type
  // Where the row's kernels live, relative to kernels/cpu/ ("avx512/vec_dot_q" is
  // arch/x86/avx512/vec_dot_q.cpp); the level below's where the row is inherited.
  const char* source = nullptr;
  Isa from = Isa::Scalar;  // the level whose kernels these are (== the row's level, or below)
};

// Every level's row, whether or not this CPU runs the level.
const KernelRow& kernel_row(DType weight, Isa isa);

// The type × level → kernels matrix, one line per type tern has kernels for; an inherited
// cell names the level it comes from.
std::string kernel_matrix();

// The kernels of the op families beside the matmul that have ISA variants, for one level: each
// bit for bit its scalar twin, so the level decides speed only. Callers read them once, at load
// or on first use, for best_isa() (which TERN_ISA can lower).
struct OpKernels {
  F16RowKernels f16_rows;     // f16 ⇄ f32 rows (row_ops.h)
  SiluMulRowFn silu_mul_row;  // one row of silu_mul (row_ops.h)
  // Paged attention's work items, per cache dtype (ops/attention_item.h).
  AttentionKernels attention;
  // The 8-bit KV cache's dequantizers (kv_quant.h); kv_dequantize_fn picks by dtype.
  KvDequantizeFn kv_dequantize_int8;
  KvDequantizeFn kv_dequantize_e4m3;
  KvDequantizeFn kv_dequantize_e5m2;
  ReadBlocksFn read_blocks;  // read_memory's loop (memory_read.h)
};

// Every level's, whether or not this CPU runs the level.
const OpKernels& op_kernels(Isa isa);

}  // namespace tern::cpu
