// Q2_K and Q3_K on NEON (vec_dot_k2_k3_neon.h) with widening multiplies, for ARM CPUs without
// sdot.
#include "tern/kernels/cpu/arch/arm/lanes16_neon.h"
#include "tern/kernels/cpu/arch/arm/vec_dot_k2_k3_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

VecDotFn neon_vec_dot_k2_k3(DType weight) { return vec_dot_k2_k3<WideningDot>(weight); }
GemmTileFn neon_gemm_tile_k2_k3(DType weight) { return gemm_tile_k2_k3<WideningDot>(weight); }

}  // namespace tern::cpu
