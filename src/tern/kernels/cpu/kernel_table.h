// The dispatch table of the matmul kernels: one row per (weight type, ISA level), a level that
// has no kernels of its own for a type inheriting the row of the level below. type_kernels
// (vec_dot.h) reads it; kernel_matrix prints it, so nobody has to simulate dispatch.
#pragma once

#include <string>

#include "tern/core/dtype.h"
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

}  // namespace tern::cpu
