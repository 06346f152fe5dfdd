// A whole matrix through blocks/quantize_row.h's row quantizers, rows spread over the CPU's
// thread team: the format is blocks/'s, running it in parallel is the CPU backend's.
#pragma once

#include <cstdint>

#include "tern/core/dtype.h"

namespace tern::cpu {

// A whole matrix, rows in parallel (OpenMP): x: [rows, k] floats, y: rows packed one after
// another (dtype_bytes(dtype, k) each). Identical to quantize_row per row. The K-type
// quantizers search scales (a few Melem/s per core), so weights of billions take minutes.
void quantize_rows(DType dtype, const float* x, void* y, int64_t rows, int64_t k);

}  // namespace tern::cpu
