// The scalar reference dot of tern's affine groups (INT4_G*, INT8_G*) against Q8_0 activations.
// It defines the arithmetic in the 16-chain form (chains16/chains.h), so the AVX-512 kernels
// reproduce it bit for bit rather than within a tolerance:
//   for each 32-element activation block b, in the weight group g it falls in:
//     isum_b  = Σ q · a,  asum_b = Σ a                       (exact integers)
//     t_b     = fma(bias_g, asum_b, scale_g · isum_b)          (the group's affine map)
//     chain_j = fma(t_b, d_b, chain_j)  for j = b mod 16       (d_b the activation's scale)
//   y = the 16 chains summed in a fixed tree: j + (j + 8), then + 4, + 2, + 1.
#include <cmath>

#include "tern/core/half.h"
#include "tern/kernels/cpu/quants/quant_blocks.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

template <class B>
float dot_affine(int64_t k, const void* vw, const void* va) {
  constexpr int kBlocksPerGroup = B::kElems / kQK;
  const auto* w = static_cast<const B*>(vw);
  const auto* a = static_cast<const BlockQ8_0*>(va);
  float chains[16] = {};
  for (int64_t b = 0; b < k / kQK; ++b) {
    const B& g = w[b / kBlocksPerGroup];
    const int first = static_cast<int>(b % kBlocksPerGroup) * kQK;
    int32_t isum = 0, asum = 0;
    for (int j = 0; j < kQK; ++j) {
      isum += affine_code(g, first + j) * a[b].qs[j];
      asum += a[b].qs[j];
    }
    const float scaled = g.scale * static_cast<float>(isum);
    const float t = std::fma(g.bias, static_cast<float>(asum), scaled);
    chains[b % 16] = std::fma(t, f16_to_f32(a[b].d), chains[b % 16]);
  }
  for (int width = 8; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) chains[j] += chains[j + width];
  return chains[0];
}

}  // namespace

VecDotFn scalar_vec_dot_affine(DType weight) {
  return with_affine_block<VecDotFn>(weight, []<class B>() -> VecDotFn { return dot_affine<B>; });
}

}  // namespace tern::cpu
