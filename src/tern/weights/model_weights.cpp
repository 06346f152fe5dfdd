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

std::optional<WeightMatrix> stacked_experts(std::span<const WeightMatrix> parts) {
  if (parts.empty()) return std::nullopt;
  const WeightMatrix& first = parts.front();
  const size_t bytes = static_cast<size_t>(first.rows) * first.row_bytes;
  for (size_t e = 0; e < parts.size(); ++e) {
    const WeightMatrix& m = parts[e];
    if (m.dtype != first.dtype || m.rows != first.rows || m.cols != first.cols ||
        m.row_bytes != first.row_bytes || m.input_order != first.input_order ||
        m.data != first.data + e * bytes)
      return std::nullopt;
  }
  WeightMatrix whole = first;
  whole.rows = first.rows * static_cast<int64_t>(parts.size());
  whole.packed = nullptr;
  return whole;
}

WeightMatrix gather_experts(std::span<const WeightMatrix> parts, std::vector<std::byte>& storage) {
  if (std::optional<WeightMatrix> whole = stacked_experts(parts)) return *whole;
  storage.clear();
  for (const WeightMatrix& m : parts)
    storage.insert(storage.end(), m.data, m.data + m.row_bytes * static_cast<size_t>(m.rows));
  WeightMatrix whole = parts.front();
  whole.rows *= static_cast<int64_t>(parts.size());
  whole.data = storage.data();
  whole.packed = nullptr;
  return whole;
}

std::vector<WeightMatrix> split_experts(const WeightMatrix& stacked, int64_t n) {
  WeightMatrix part = stacked;
  part.rows = stacked.rows / n;
  part.packed = nullptr;
  std::vector<WeightMatrix> parts(static_cast<size_t>(n), part);
  for (int64_t e = 0; e < n; ++e) parts[static_cast<size_t>(e)].data = stacked.row(e * part.rows);
  return parts;
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
