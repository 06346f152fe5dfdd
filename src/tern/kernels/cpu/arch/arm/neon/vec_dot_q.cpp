// Q4_0 and Q8_0 on NEON: the 16-chain arithmetic (vec_dot_q_neon.h) with widening multiplies
// for the integer dots, for ARM CPUs without sdot.
#include "tern/kernels/cpu/arch/arm/vec_dot_q_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

VecDotFn neon_vec_dot_q(DType weight) {
  switch (weight) {
    case DType::Q4_0:
      return vec_dot_q<WideningDot, BlockQ4_0>;
    case DType::Q8_0:
      return vec_dot_q<WideningDot, BlockQ8_0>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
