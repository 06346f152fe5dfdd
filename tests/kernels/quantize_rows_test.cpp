// quantize_rows: a matrix quantized on the thread team is the same bytes as row by row.
#include "tern/kernels/cpu/quants/quantize_rows.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "tern/blocks/quantize_row.h"

namespace tern::cpu {
namespace {

using testing::gaussian;

TEST(Quantize, RowsInParallelEqualRowByRow) {
  const int64_t rows = 37, k = 256;
  const std::vector<float> x = gaussian(rows * k, 4);
  for (DType t : {DType::Q4_K, DType::Q8_0, DType::BF16}) {
    const size_t row_bytes = *dtype_bytes(t, k);
    std::vector<uint8_t> all(rows * row_bytes), one(rows * row_bytes);
    quantize_rows(t, x.data(), all.data(), rows, k);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(t, x.data() + r * k, one.data() + r * row_bytes, k);
    EXPECT_EQ(all, one) << dtype_name(t);
  }
}

}  // namespace
}  // namespace tern::cpu
