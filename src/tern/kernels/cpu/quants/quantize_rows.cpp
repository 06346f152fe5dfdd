#include "tern/kernels/cpu/quants/quantize_rows.h"

#include "tern/blocks/quantize_row.h"
#include "tern/kernels/cpu/stealing_split.h"

namespace tern::cpu {

void quantize_rows(DType dtype, const float* x, void* y, int64_t rows, int64_t k) {
  QuantizeFn fn = quantize_fn(dtype);
  check_whole_blocks(dtype, k);
  const auto row_bytes = static_cast<int64_t>(*dtype_bytes(dtype, static_cast<uint64_t>(k)));
  parallel_for(rows,
               [&](int64_t r) { fn(x + r * k, static_cast<uint8_t*>(y) + r * row_bytes, k); });
}

}  // namespace tern::cpu
