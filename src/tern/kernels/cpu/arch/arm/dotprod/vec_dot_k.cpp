// Q4_K, Q5_K and Q6_K with sdot: the 16-chain arithmetic of vec_dot_k_neon.h, the same values
// as neon/vec_dot_k.cpp in fewer instructions.
#include "tern/kernels/cpu/arch/arm/dotprod/sdot.h"
#include "tern/kernels/cpu/arch/arm/vec_dot_k_neon.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

VecDotFn dotprod_vec_dot_k(DType weight) {
  switch (weight) {
    case DType::Q4_K:
      return vec_dot_k<SdotDot, BlockQ4_K>;
    case DType::Q5_K:
      return vec_dot_k<SdotDot, BlockQ5_K>;
    case DType::Q6_K:
      return vec_dot_k<SdotDot, BlockQ6_K>;
    default:
      return nullptr;
  }
}

}  // namespace tern::cpu
