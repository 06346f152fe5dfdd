// Element types of weights and activations. Quantized types keep ggml's block layouts, so a
// tensor of such a type is `nelements / block_elems` blocks of `block_bytes` bytes each.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tern {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  F64,
  I8,
  I16,
  I32,
  I64,
  U8,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q8_0,
  Q8_1,
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K,
  Q8_K,
};

struct DTypeTraits {
  DType dtype;
  std::string_view name;         // "Q4_K", "F16", … (ggml's spelling)
  int32_t block_elems;           // elements per block (1 for plain types)
  int32_t block_bytes;           // bytes per block
  int32_t ggml_type;             // the id in GGUF files, or -1 when ggml has no such type
  std::string_view safetensors;  // the dtype string in safetensors headers, or "" when none
};

const DTypeTraits& dtype_traits(DType dtype);
inline std::string_view dtype_name(DType dtype) { return dtype_traits(dtype).name; }

std::optional<DType> dtype_from_ggml(uint32_t ggml_type);
std::optional<DType> dtype_from_safetensors(std::string_view name);
std::optional<DType> dtype_from_name(std::string_view name);  // "Q8_0", "f16", … (any case)

// ggml's name for a type id, including ones tern does not load ("IQ2_XXS"), for error messages.
std::string_view ggml_type_name(uint32_t ggml_type);

// Bytes of `nelements` elements of `dtype`; nullopt when nelements is not a whole number of
// blocks or the size would overflow.
std::optional<uint64_t> dtype_bytes(DType dtype, uint64_t nelements);

}  // namespace tern
