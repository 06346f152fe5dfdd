// Q4_0 and Q8_0 with sdot: the 16-chain arithmetic of vec_dot_q_neon.h, the same values as
// neon/vec_dot_q.cpp in fewer instructions.
#include "tern/kernels/cpu/arch/arm/dotprod/sdot.h"
#include "tern/kernels/cpu/arch/arm/vec_dot_q_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

VecDotFn dotprod_vec_dot_q(DType weight) {
  switch (weight) {
    case DType::Q4_0:
      return vec_dot_q<SdotDot, BlockQ4_0>;
    case DType::Q8_0:
      return vec_dot_q<SdotDot, BlockQ8_0>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
