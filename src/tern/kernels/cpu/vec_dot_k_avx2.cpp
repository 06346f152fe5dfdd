// AVX2 dot kernels of the "k" family of weight types (see vec_dot_isa.h).
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

// No AVX2 kernels of this family yet: the dispatcher falls back to a lower ISA.
VecDotFn avx2_vec_dot_k(DType /*weight*/) { return nullptr; }

}  // namespace tern::cpu
