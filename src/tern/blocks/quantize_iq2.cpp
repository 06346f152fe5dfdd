// The 2-bit lattice types' dequantizers (quantize_row_impl.h); tern has no quantizer for them
// (llama-quantize's grid search with an importance matrix writes them).
#include "tern/blocks/block_layouts.h"
#include "tern/blocks/quantize_row_impl.h"
#include "tern/core/half.h"

namespace tern {
namespace {

// y[32 j + 16 h + e] = (d / 8 · (2 ls + 1)) · m · ±1: the scale rounded once, as ggml's
// dequantize_row_iq2_xxs / _xs / _s (d · (0.5 + ls) · 0.25 is the same real).
template <typename Block>
void dequantize_iq2(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const Block*>(vx);
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const float d = f16_to_f32(x[i].d) * lattice_factor(x);
    for (int j = 0; j < kQKK / kQK; ++j) {
      const uint32_t signs = lattice_signs(x[i], j);
      for (int e = 0; e < kQK; ++e) {
        const float scale = d * static_cast<float>(lattice_scale(x[i], j, e / 16));
        const auto m = static_cast<float>((lattice_grid(x[i], j, e / 8) >> (8 * (e % 8))) & 0xff);
        y[kQK * j + e] = scale * ((signs >> e) & 1 ? -m : m);
      }
    }
    y += kQKK;
  }
}

}  // namespace

void dequantize_row_iq2_xxs(const void* x, float* y, int64_t k) {
  dequantize_iq2<BlockIq2Xxs>(x, y, k);
}
void dequantize_row_iq2_xs(const void* x, float* y, int64_t k) {
  dequantize_iq2<BlockIq2Xs>(x, y, k);
}
void dequantize_row_iq2_s(const void* x, float* y, int64_t k) {
  dequantize_iq2<BlockIq2S>(x, y, k);
}

}  // namespace tern
