// The handle of one weight matrix: its type, shape and bytes where they lie. It is what the
// Backend's ops take, so it sits below backend/ and models/ both.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tern/core/dtype.h"

namespace tern {

// A weight matrix of `rows` outputs by `cols` inputs, row-major; each row is whole blocks of
// `dtype` and `row_bytes` long. Points into a mapping or into ModelWeights' own storage.
struct WeightMatrix {
  DType dtype = DType::F32;
  int64_t rows = 0;  // N
  int64_t cols = 0;  // K
  const std::byte* data = nullptr;
  size_t row_bytes = 0;
  // The rows rearranged for the best ISA's kernels (pack_for_kernels), or nullptr.
  const std::byte* packed = nullptr;
  // An act-order checkpoint's input permutation [cols] (cpu::WeightView::input_order), owned
  // by the ModelWeights and shared by the matrices that have the same one; nullptr: none.
  const int32_t* input_order = nullptr;

  bool empty() const { return data == nullptr; }
  const std::byte* row(int64_t i) const { return data + static_cast<size_t>(i) * row_bytes; }
};

// A weight matrix as far as sizes care (`tern plan`, working memory): its type and shape.
struct MatrixShape {
  DType dtype = DType::F32;
  int64_t rows = 0;  // N
  int64_t cols = 0;  // K
};

}  // namespace tern
