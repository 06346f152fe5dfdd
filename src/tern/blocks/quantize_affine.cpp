// Row quantizers and dequantizers of tern's affine groups (INT4_G*, INT8_G*; block_layouts.h).
//
// The quantizer is GPTQ's round to nearest: the group's range, widened to hold 0, split into
// 2^bits − 1 steps of an f16 scale, and an integer zero point z, so that every group it makes
// is s · (q − z) with f16 s as a GPTQ or AWQ checkpoint stores it (bias = −s · z), and can be
// written to one without a change of value.
#include <algorithm>
#include <cmath>

#include "tern/blocks/block_layouts.h"
#include "tern/blocks/quantize_row_impl.h"
#include "tern/core/half.h"

namespace tern {
namespace {

template <class B>
void quantize_row_affine(const float* x, void* y, int64_t k) {
  constexpr int kMaxQ = (1 << B::kBitsPerCode) - 1;
  auto* out = static_cast<B*>(y);
  for (int64_t g = 0; g < k / B::kElems; ++g) {
    const float* v = x + g * B::kElems;
    float lo = 0.0f, hi = 0.0f;
    for (int i = 0; i < B::kElems; ++i) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
    if (lo == hi) lo = -1.0f, hi = 1.0f;  // all zero: any scale, as GPTQ's quantizer does
    // f16 first, and the zero and codes against the rounded scale.
    float scale = f16_to_f32(f32_to_f16((hi - lo) / kMaxQ));
    if (scale == 0.0f) scale = f16_to_f32(1);  // a range below f16's smallest step
    const float inverse = 1.0f / scale;
    const int zero = clamp_int(nearest_int(-lo * inverse), 0, kMaxQ);
    B& b = out[g];
    b.scale = scale;
    b.bias = -scale * static_cast<float>(zero);
    for (int i = 0; i < B::kElems; ++i)
      set_affine_code(b, i, clamp_int(nearest_int(v[i] * inverse) + zero, 0, kMaxQ));
  }
}

template <class B>
void dequantize_row_affine(const void* x, float* y, int64_t k) {
  const auto* in = static_cast<const B*>(x);
  for (int64_t g = 0; g < k / B::kElems; ++g)
    for (int i = 0; i < B::kElems; ++i)
      y[g * B::kElems + i] =
          std::fma(in[g].scale, static_cast<float>(affine_code(in[g], i)), in[g].bias);
}

}  // namespace

QuantizeFn affine_quantize_fn(DType dtype) {
  return with_affine_block<QuantizeFn>(
      dtype, []<class B>() -> QuantizeFn { return quantize_row_affine<B>; });
}

DequantizeFn affine_dequantize_fn(DType dtype) {
  return with_affine_block<DequantizeFn>(
      dtype, []<class B>() -> DequantizeFn { return dequantize_row_affine<B>; });
}

}  // namespace tern
