// The weight quantizers (weight_quantizer.h): each block fitted and packed by block_code.h.
#include "tern/quant/weight_quantizer.h"

#include <algorithm>
#include <string>
#include <vector>

#include "tern/blocks/lattice_fit.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/quant/block_code.h"

namespace tern::quant {
namespace {

// The block weights: the importances, with equal ones for a block where they are all 0 (a
// column never activated in the calibration text says nothing about its block's other columns).
void block_weights(const float* importance, int64_t k, int block, std::vector<float>& w) {
  w.assign(static_cast<size_t>(k), 1.0f);
  if (importance == nullptr) return;
  for (int64_t b = 0; b < k; b += block) {
    float sum = 0.0f;
    for (int i = 0; i < block; ++i) sum += importance[b + i];
    if (sum > 0.0f) std::copy(importance + b, importance + b + block, w.begin() + b);
  }
}

void check_row(DType dtype, int64_t k) {
  if (!has_weight_quantizer(dtype))
    throw Error("no weight quantizer for type " + std::string(dtype_name(dtype)));
  const int64_t block = dtype_traits(dtype).block_elems;
  if (k <= 0 || k % block != 0)
    throw Error("row of " + std::to_string(k) + " elements is not a whole number of " +
                std::string(dtype_name(dtype)) + " blocks of " + std::to_string(block));
}

void quantize_checked(DType dtype, const float* x, void* y, int64_t k, const float* importance,
                      AffineRule rule, std::vector<float>& w) {
  switch (dtype) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      quantize_row(dtype, x, y, k);
      return;
    default:
      break;
  }
  // The lattice types choose a group's elements together (a grid entry), not one by one, so they
  // have no BlockCode (nor GPTQ, which rounds column by column): lattice_fit.h fits a row whole.
  if (has_lattice_fit(dtype)) {
    if (importance == nullptr) return fit_lattice_row(dtype, x, y, k, nullptr);
    block_weights(importance, k, static_cast<int>(dtype_traits(dtype).block_elems), w);
    return fit_lattice_row(dtype, x, y, k, w.data());
  }
  const BlockFormat format = block_format(dtype);
  block_weights(importance, k, format.elems, w);
  const auto block_bytes =
      static_cast<size_t>(*dtype_bytes(dtype, static_cast<uint64_t>(format.elems)));
  BlockCode code;
  for (int64_t s = 0; s < k; s += format.elems) {
    fit_block(dtype, x + s, w.data() + s, &code, rule);
    pack_block(dtype, code,
               static_cast<uint8_t*>(y) + static_cast<size_t>(s / format.elems) * block_bytes);
  }
}

}  // namespace

bool has_weight_quantizer(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16 ||
         has_block_code(dtype) || has_lattice_fit(dtype);
}

void quantize_weight_row(DType dtype, const float* x, void* y, int64_t k, const float* importance,
                         AffineRule rule) {
  check_row(dtype, k);
  std::vector<float> w;
  quantize_checked(dtype, x, y, k, importance, rule, w);
}

void quantize_weight_rows(DType dtype, const float* x, void* y, int64_t rows, int64_t k,
                          const float* importance, AffineRule rule) {
  check_row(dtype, k);
  const auto row_bytes = static_cast<int64_t>(*dtype_bytes(dtype, static_cast<uint64_t>(k)));
#pragma omp parallel
  {
    std::vector<float> w;
#pragma omp for schedule(dynamic, 8)
    for (int64_t r = 0; r < rows; ++r)
      quantize_checked(dtype, x + r * k, static_cast<uint8_t*>(y) + r * row_bytes, k, importance,
                       rule, w);
  }
}

double weighted_error(DType dtype, const float* x, const void* y, int64_t k,
                      const float* importance) {
  std::vector<float> back(static_cast<size_t>(k));
  dequantize_row(dtype, y, back.data(), k);
  double err = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    const double e = static_cast<double>(x[i]) - back[static_cast<size_t>(i)];
    err += (importance != nullptr ? importance[i] : 1.0) * e * e;
  }
  return err;
}

}  // namespace tern::quant
