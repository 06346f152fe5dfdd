#include "tern/models/openai_experts.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tern/blocks/block_layouts.h"
#include "tern/core/error.h"

namespace tern {

WeightMatrix openai_mxfp4_rows(const TensorInfo& blocks, const TensorInfo& scales, int64_t n,
                               int64_t rows, int64_t cols, int64_t first_row, int64_t row_step,
                               ModelWeights& w) {
  if (cols % kQK != 0)
    throw Error("tensor '" + blocks.name + "': rows of " + std::to_string(cols) +
                " elements are not whole MXFP4 blocks of 32");
  const int64_t groups = cols / kQK;
  const std::vector<int64_t> block_shape{n, rows, groups, kQK / 2}, scale_shape{n, rows, groups};
  for (const auto& [t, shape] : {std::pair{&blocks, block_shape}, std::pair{&scales, scale_shape}})
    if (t->dtype != DType::U8 || t->shape != shape)
      throw Error("tensor '" + t->name + "' is " + std::string(dtype_name(t->dtype)) + " " +
                  shape_text(t->shape) + ", expected U8 " + shape_text(shape) +
                  " (OpenAI's MXFP4 from the config's sizes)");

  const int64_t kept = (rows - first_row + row_step - 1) / row_step;
  std::span<std::byte> out =
      w.own_bytes(static_cast<size_t>(n * kept * groups) * sizeof(BlockMxfp4));
  auto* to = reinterpret_cast<BlockMxfp4*>(out.data());
  const auto* codes = reinterpret_cast<const uint8_t*>(blocks.data);
  const auto* exponents = reinterpret_cast<const uint8_t*>(scales.data);
  for (int64_t e = 0; e < n; ++e)
    for (int64_t r = first_row; r < rows; r += row_step)
      for (int64_t g = 0; g < groups; ++g, ++to) {
        const int64_t block = (e * rows + r) * groups + g;
        const uint8_t* in = codes + block * (kQK / 2);
        // Element i's code: byte i / 2, the upper nibble for odd i.
        auto code = [&](int i) { return (in[i / 2] >> (4 * (i % 2))) & 0xF; };
        to->e = exponents[block];
        for (int j = 0; j < kQK / 2; ++j)
          to->qs[j] = static_cast<uint8_t>(code(j) | code(j + kQK / 2) << 4);
      }
  return {DType::MXFP4, n * kept, cols, out.data(),
          static_cast<size_t>(groups) * sizeof(BlockMxfp4)};
}

WeightMatrix openai_transposed_rows(const TensorInfo& t, int64_t n, int64_t rows, int64_t cols,
                                    int64_t first_row, int64_t row_step, ModelWeights& w) {
  const std::vector<int64_t> shape{n, cols, rows};
  if ((t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16) ||
      t.shape != shape)
    throw Error("tensor '" + t.name + "' is " + std::string(dtype_name(t.dtype)) + " " +
                shape_text(t.shape) + ", expected F32, F16 or BF16 " + shape_text(shape) +
                " (gpt-oss's unquantized experts, inputs first, from the config's sizes)");
  const size_t size = t.dtype == DType::F32 ? 4 : 2;
  const int64_t kept = (rows - first_row + row_step - 1) / row_step;
  std::span<std::byte> out = w.own_bytes(static_cast<size_t>(n * kept * cols) * size);
  std::byte* to = out.data();
  for (int64_t e = 0; e < n; ++e)
    for (int64_t r = first_row; r < rows; r += row_step)
      for (int64_t c = 0; c < cols; ++c, to += size)
        std::memcpy(to, t.data + static_cast<size_t>((e * cols + c) * rows + r) * size, size);
  return {t.dtype, n * kept, cols, out.data(), static_cast<size_t>(cols) * size};
}

}  // namespace tern
