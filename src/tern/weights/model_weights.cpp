// ModelWeights' storage (the memory its views point into, the files kept mapped) and the
// embedding lookup.
#include "tern/weights/model_weights.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/core/mapped_file.h"

namespace tern {

std::string_view rope_layout_name(RopeLayout layout) {
  return layout == RopeLayout::Interleaved ? "interleaved" : "neox";
}

void ModelWeights::AlignedFree::operator()(std::byte* p) const { std::free(p); }

std::span<float> ModelWeights::own_floats(size_t n) {
  std::span<std::byte> bytes = own_bytes(n * sizeof(float));
  return {reinterpret_cast<float*>(bytes.data()), n};
}

std::span<std::byte> ModelWeights::own_bytes(size_t n) {
  const size_t rounded = (n + 63) / 64 * 64;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
  if (p == nullptr)
    throw Error("out of memory allocating " + std::to_string(n) + " bytes of weights");
  owned_.emplace_back(p);
  return {p, n};
}

void ModelWeights::keep_mapping(std::shared_ptr<const MappedFile> file) {
  mappings_.push_back(file);
  keep_alive(std::move(file));
}

void ModelWeights::drop_file_pages(const WeightMatrix& m) const {
  const std::span<const std::byte> bytes(m.data, static_cast<size_t>(m.rows) * m.row_bytes);
  for (const auto& file : mappings_) file->drop_resident(bytes);
}

void ModelWeights::embed(int32_t token, float* out) const {
  const std::byte* row = token_embedding.row(token);
  if (token_embedding.dtype == DType::F32) {
    std::memcpy(out, row, static_cast<size_t>(token_embedding.cols) * sizeof(float));
  } else {
    dequantize_row(token_embedding.dtype, row, out, token_embedding.cols);
  }
}

}  // namespace tern
