// Q2_K and Q3_K with sdot (vec_dot_k2_k3_neon.h): the same values as neon/vec_dot_k2_k3.cpp in
// fewer instructions.
#include "tern/kernels/cpu/arch/arm/dotprod/sdot.h"
#include "tern/kernels/cpu/arch/arm/vec_dot_k2_k3_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

VecDotFn dotprod_vec_dot_k2_k3(DType weight) { return vec_dot_k2_k3<SdotDot>(weight); }
GemmTileFn dotprod_gemm_tile_k2_k3(DType weight) { return gemm_tile_k2_k3<SdotDot>(weight); }

}  // namespace tern::cpu
