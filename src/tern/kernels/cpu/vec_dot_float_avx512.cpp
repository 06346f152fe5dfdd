// AVX512 dot kernels of the "float" family of weight types (see vec_dot_isa.h).
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {

// No AVX512 kernels of this family yet: the dispatcher falls back to a lower ISA.
VecDotFn avx512_vec_dot_float(DType /*weight*/) { return nullptr; }

}  // namespace tern::cpu
