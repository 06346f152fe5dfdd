// The 1-bit lattice types' dequantizers (quantize_row_impl.h); tern has no quantizer for them
// (llama-quantize's grid search with an importance matrix writes them).
#include "tern/blocks/block_layouts.h"
#include "tern/blocks/quantize_row_impl.h"
#include "tern/core/half.h"

namespace tern {
namespace {

// y[32 j + 8 l + e] = (d · (2 ls + 1)) · (g_e + δ_l / 8): the scale rounded once, then one
// rounding of its product with the exact g ± 1/8, as ggml's dequantize_row_iq1_s / _m.
template <typename Block>
void dequantize_iq1(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const Block*>(vx);
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const float d = f16_to_f32(iq1_d_bits(x[i]));
    for (int j = 0; j < kQKK / kQK; ++j) {
      for (int l = 0; l < 4; ++l, y += 8) {
        const float scale = d * static_cast<float>(iq1_scale(x[i], j, l / 2));
        const float delta = 0.125f * static_cast<float>(iq1_delta(x[i], j, l));
        const int index = iq1_index(x[i], j, l);
        for (int e = 0; e < 8; ++e)
          y[e] = scale * (static_cast<float>(iq1_grid_value(index, e)) + delta);
      }
    }
  }
}

}  // namespace

void dequantize_row_iq1_s(const void* x, float* y, int64_t k) {
  dequantize_iq1<BlockIq1S>(x, y, k);
}
void dequantize_row_iq1_m(const void* x, float* y, int64_t k) {
  dequantize_iq1<BlockIq1M>(x, y, k);
}

}  // namespace tern
