// The lattice types' row quantizers and dequantizers (IQ3, IQ2 and IQ1; quantize_row_impl.h): the
// quantizers are lattice_fit.h's searches without an importance matrix.
#include "tern/blocks/block_layouts.h"
#include "tern/blocks/lattice_fit.h"
#include "tern/blocks/quantize_row_impl.h"
#include "tern/core/half.h"

namespace tern {
namespace {

// IQ3_XXS, IQ3_S and the IQ2 types: y[32 j + e] = (d · factor · (2 ls + 1)) · m_e · ±1, ls the
// scale of element e's half sub-block (IQ3's halves share one): the scale rounded once, as ggml's
// dequantize_row_iq3_xxs / _s and _iq2_xxs / _xs / _s (d · (0.5 + ls) · 0.5 and · 0.25, and
// d · (1 + 2 ls), are the same reals).
template <typename Block>
void dequantize_lattice_signs(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const Block*>(vx);
  // IQ3's grid entries hold 4 magnitudes, IQ2's 8.
  constexpr int kPerEntry = sizeof(lattice_grid(x[0], 0, 0));
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const float d = f16_to_f32(x[i].d) * lattice_factor(x);
    for (int j = 0; j < kQKK / kQK; ++j, y += kQK) {
      const uint32_t signs = lattice_signs(x[i], j);
      for (int e = 0; e < kQK; ++e) {
        const float scale = d * static_cast<float>(lattice_scale(x[i], j, e / 16));
        const auto m = static_cast<float>(
            (lattice_grid(x[i], j, e / kPerEntry) >> (8 * (e % kPerEntry))) & 0xff);
        y[e] = scale * ((signs >> e) & 1 ? -m : m);
      }
    }
  }
}

// IQ1_S and IQ1_M: y[32 j + 8 l + e] = (d · (2 ls + 1)) · (g_e + δ_l / 8): the scale rounded once,
// then one rounding of its product with the exact g ± 1/8, as ggml's dequantize_row_iq1_s / _m.
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

void quantize_row_iq3_xxs(const float* x, void* y, int64_t k) {
  fit_lattice_row(DType::IQ3_XXS, x, y, k, nullptr);
}
void quantize_row_iq3_s(const float* x, void* y, int64_t k) {
  fit_lattice_row(DType::IQ3_S, x, y, k, nullptr);
}
void quantize_row_iq2_xxs(const float* x, void* y, int64_t k) {
  fit_lattice_row(DType::IQ2_XXS, x, y, k, nullptr);
}
void quantize_row_iq2_xs(const float* x, void* y, int64_t k) {
  fit_lattice_row(DType::IQ2_XS, x, y, k, nullptr);
}
void quantize_row_iq2_s(const float* x, void* y, int64_t k) {
  fit_lattice_row(DType::IQ2_S, x, y, k, nullptr);
}
void quantize_row_iq1_s(const float* x, void* y, int64_t k) {
  fit_lattice_row(DType::IQ1_S, x, y, k, nullptr);
}
void quantize_row_iq1_m(const float* x, void* y, int64_t k) {
  fit_lattice_row(DType::IQ1_M, x, y, k, nullptr);
}

void dequantize_row_iq3_xxs(const void* x, float* y, int64_t k) {
  dequantize_lattice_signs<BlockIq3Xxs>(x, y, k);
}
void dequantize_row_iq3_s(const void* x, float* y, int64_t k) {
  dequantize_lattice_signs<BlockIq3S>(x, y, k);
}
void dequantize_row_iq2_xxs(const void* x, float* y, int64_t k) {
  dequantize_lattice_signs<BlockIq2Xxs>(x, y, k);
}
void dequantize_row_iq2_xs(const void* x, float* y, int64_t k) {
  dequantize_lattice_signs<BlockIq2Xs>(x, y, k);
}
void dequantize_row_iq2_s(const void* x, float* y, int64_t k) {
  dequantize_lattice_signs<BlockIq2S>(x, y, k);
}
void dequantize_row_iq1_s(const void* x, float* y, int64_t k) {
  dequantize_iq1<BlockIq1S>(x, y, k);
}
void dequantize_row_iq1_m(const void* x, float* y, int64_t k) {
  dequantize_iq1<BlockIq1M>(x, y, k);
}

}  // namespace tern
