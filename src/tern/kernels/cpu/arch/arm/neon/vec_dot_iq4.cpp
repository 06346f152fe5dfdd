// IQ4_NL, IQ4_XS and MXFP4 on NEON (vec_dot_iq4_neon.h) with widening multiplies, for ARM CPUs
// without sdot.
#include "tern/kernels/cpu/arch/arm/vec_dot_iq4_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

VecDotFn neon_vec_dot_iq4(DType weight) { return vec_dot_iq4<QuadWideningDot>(weight); }
GemmTileFn neon_gemm_tile_iq4(DType weight) { return gemm_tile_iq4<QuadWideningDot>(weight); }

}  // namespace tern::cpu
