// The scalar reference dot of tern's affine groups (INT4_G*, INT8_G*) against Q8_0 activations.
// It defines the arithmetic in the 16-chain form (avx512/chains.h), so the AVX-512 kernels
// reproduce it bit for bit rather than within a tolerance. For each weight group g (scale s_g,
// bias β_g) and its 32-element activation blocks b (scale d_b):
//   isum_b = Σ q · a,  asum_b = Σ a                            (exact integers)
//   u_g    = Σ_b isum_b · d_b,  A_g = Σ_b asum_b · d_b         (fma after fma, in block order)
//   chain_j = fma(β_g, A_g, fma(s_g, u_g, chain_j))  for j = g mod 16
//   y = the 16 chains summed in a fixed tree: j + (j + 8), then + 4, + 2, + 1.
// Two float steps per group, not per block: the group's scale and bias apply once to the sums
// of all its blocks (A_g depends only on the activations, so a matmul makes it once per token).
#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/quants/affine_group_dot.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

template <class B>
float dot_affine(int64_t k, const void* w, const void* a) {
  return affine_group_dot<B>(k, w, a, [](const B& wg, int sub, const BlockQ8_0& ab) {
    AffineBlockSums s{0, 0};
    for (int j = 0; j < kQK; ++j) {
      s.isum += affine_code(wg, sub * kQK + j) * ab.qs[j];
      s.asum += ab.qs[j];
    }
    return s;
  });
}

}  // namespace

VecDotFn scalar_vec_dot_affine(DType weight) {
  return with_affine_block<VecDotFn>(weight, []<class B>() -> VecDotFn { return dot_affine<B>; });
}

}  // namespace tern::cpu
