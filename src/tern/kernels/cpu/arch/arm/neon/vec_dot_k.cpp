// Q4_K, Q5_K and Q6_K on NEON: the 16-chain arithmetic (vec_dot_k_neon.h) with widening
// multiplies for the integer dots, for ARM CPUs without sdot.
#include "tern/kernels/cpu/arch/arm/vec_dot_k_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

VecDotFn neon_vec_dot_k(DType weight) {
  switch (weight) {
    case DType::Q4_K:
      return vec_dot_k<WideningDot, BlockQ4_K>;
    case DType::Q5_K:
      return vec_dot_k<WideningDot, BlockQ5_K>;
    case DType::Q6_K:
      return vec_dot_k<WideningDot, BlockQ6_K>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
