// IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and IQ1_M on NEON (vec_dot_lattice_neon.h) with
// widening multiplies, for ARM CPUs without sdot.
#include "tern/kernels/cpu/arch/arm/lanes16_neon.h"
#include "tern/kernels/cpu/arch/arm/vec_dot_lattice_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

VecDotFn neon_vec_dot_lattice(DType weight) { return vec_dot_lattice<WideningDot>(weight); }
GemmTileFn neon_gemm_tile_lattice(DType weight) { return gemm_tile_lattice<WideningDot>(weight); }

}  // namespace tern::cpu
