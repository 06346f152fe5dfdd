// IQ4_NL, IQ4_XS and MXFP4 with sdot (vec_dot_iq4_neon.h): the same values as
// neon/vec_dot_iq4.cpp in fewer instructions.
#include "tern/kernels/cpu/arch/arm/dotprod/sdot.h"
#include "tern/kernels/cpu/arch/arm/vec_dot_iq4_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

VecDotFn dotprod_vec_dot_iq4(DType weight) { return vec_dot_iq4<SdotDot>(weight); }
GemmTileFn dotprod_gemm_tile_iq4(DType weight) { return gemm_tile_iq4<SdotDot>(weight); }

}  // namespace tern::cpu
