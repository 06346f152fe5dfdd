// Fuzzes a quantized checkpoint's settings and the shape checks of its tensors. Input: a
// config.json, a NUL byte, two bytes each of the module's output and input widths (/ 32), then
// a safetensors file. Any input gives a repacked matrix or a tern::Error; an accepted matrix
// is of the settings' type and shape, and its act-order permutation is one of the inputs.
// Accepted settings written back into the config (what `tern quantize --output-format` does)
// read back as the same settings.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/checkpoint_quantization.h"
#include "tern/formats/safetensors.h"
#include "tern/models/checkpoint_weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* text = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(text, 0, size);
  if (nul == nullptr) return 0;
  const size_t config_size = static_cast<size_t>(static_cast<const char*>(nul) - text);
  if (size < config_size + 5) return 0;
  const uint8_t* widths = data + config_size + 1;
  // Up to 2048 × 2048: enough for every group size, small enough to allocate.
  const int64_t rows = 32 * (1 + (widths[0] | widths[1] << 8) % 64);
  const int64_t cols = 32 * (1 + (widths[2] | widths[3] << 8) % 64);
  try {
    const std::optional<tern::CheckpointQuantization> q =
        tern::parse_checkpoint_quantization(std::string_view(text, config_size), "config.json");
    if (!q) return 0;
    if (q->bits != 4 && q->bits != 8) __builtin_trap();
    const std::optional<tern::CheckpointQuantization> again = tern::parse_checkpoint_quantization(
        tern::with_checkpoint_quantization(std::string_view(text, config_size), "config.json", *q,
                                           "float16"),
        "written");
    if (!again || again->method != q->method || again->bits != q->bits ||
        again->group_size != q->group_size || again->desc_act != q->desc_act ||
        again->sym != q->sym || again->zeros_minus_one != q->zeros_minus_one ||
        again->mlx_modules.size() != q->mlx_modules.size())
      __builtin_trap();
    const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(widths + 4),
                                       reinterpret_cast<const std::byte*>(data + size));
    const tern::SafetensorsFile file = tern::SafetensorsFile::parse(
        std::make_shared<const tern::MappedFile>("model.safetensors", bytes));
    tern::ModelWeights w;
    tern::InputOrders orders;
    const std::optional<tern::WeightMatrix> m = tern::read_quantized_matrix(
        *q, [&](std::string_view name) { return file.find_tensor(name); }, "model.safetensors", "m",
        rows, cols, w, orders);
    if (!m) return 0;
    if (m->rows != rows || m->cols != cols || !tern::affine_int_format(m->dtype)) __builtin_trap();
    if (m->input_order != nullptr) {
      std::vector<bool> seen(static_cast<size_t>(cols), false);
      for (int64_t j = 0; j < cols; ++j) {
        const int32_t k = m->input_order[j];
        if (k < 0 || k >= cols || seen[static_cast<size_t>(k)]) __builtin_trap();
        seen[static_cast<size_t>(k)] = true;
      }
    }
  } catch (const tern::Error&) {
  }
  return 0;
}
