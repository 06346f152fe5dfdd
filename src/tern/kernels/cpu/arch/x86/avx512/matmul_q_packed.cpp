// The AVX-512 level's Q4_0 and Q8_0 matmuls (no AMX): every token count as passes of the
// 16-chain VNNI dots of avx512/q_packed.h, on packed weights or packed per call.
#include "tern/kernels/cpu/arch/x86/avx512/q_packed.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

GemmTileFn chains16_gemm_q(DType weight) { return gemm_of<false>(weight); }
const PackedKernels* chains16_packed_q(DType weight) { return packed_of<false>(weight); }

}  // namespace tern::cpu
