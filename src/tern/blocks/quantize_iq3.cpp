// The 3-bit lattice types' dequantizers (quantize_row_impl.h); tern has no quantizer for them
// (llama-quantize's grid search with an importance matrix writes them).
#include "tern/blocks/block_layouts.h"
#include "tern/blocks/quantize_row_impl.h"
#include "tern/core/half.h"

namespace tern {
namespace {

// y[32 j + e] = (d · factor · (2 ls_j + 1)) · m_e · ±1: the scale rounded once, as ggml's
// dequantize_row_iq3_xxs / _s (d · (0.5 + ls) · 0.5 and d · (1 + 2 ls) are the same reals).
template <typename Block>
void dequantize_iq3(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const Block*>(vx);
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const float d = f16_to_f32(x[i].d) * lattice_factor(x);
    for (int j = 0; j < kQKK / kQK; ++j, y += kQK) {
      const float scale = d * static_cast<float>(lattice_scale(x[i], j, 0));
      const uint32_t signs = lattice_signs(x[i], j);
      for (int e = 0; e < kQK; ++e) {
        const auto m = static_cast<float>((lattice_grid(x[i], j, e / 4) >> (8 * (e % 4))) & 0xff);
        y[e] = scale * ((signs >> e) & 1 ? -m : m);
      }
    }
  }
}

}  // namespace

void dequantize_row_iq3_xxs(const void* x, float* y, int64_t k) {
  dequantize_iq3<BlockIq3Xxs>(x, y, k);
}
void dequantize_row_iq3_s(const void* x, float* y, int64_t k) {
  dequantize_iq3<BlockIq3S>(x, y, k);
}

}  // namespace tern
