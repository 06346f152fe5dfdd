// IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and IQ1_M with sdot (vec_dot_lattice_neon.h): the
// same values as neon/vec_dot_lattice.cpp in fewer instructions.
#include "tern/kernels/cpu/arch/arm/dotprod/sdot.h"
#include "tern/kernels/cpu/arch/arm/vec_dot_lattice_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

VecDotFn dotprod_vec_dot_lattice(DType weight) { return vec_dot_lattice<SdotDot>(weight); }
GemmTileFn dotprod_gemm_tile_lattice(DType weight) { return gemm_tile_lattice<SdotDot>(weight); }

}  // namespace tern::cpu
