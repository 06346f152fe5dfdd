// KV cache element types: names and sizes.
#include "tern/blocks/kv_dtype.h"

#include <algorithm>
#include <cctype>

#include "tern/core/error.h"

namespace tern {

std::string_view kv_dtype_name(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::F16:
      return "f16";
    case KvDtype::BF16:
      return "bf16";
    case KvDtype::F32:
      return "f32";
    case KvDtype::Fp8E4M3:
      return "fp8_e4m3";
    case KvDtype::Fp8E5M2:
      return "fp8_e5m2";
    case KvDtype::Int8:
      return "int8";
  }
  return "?";
}

std::optional<KvDtype> kv_dtype_from_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "auto" || lower == "f16" || lower == "float16" || lower == "half" || lower == "fp16")
    return KvDtype::F16;
  if (lower == "bf16" || lower == "bfloat16") return KvDtype::BF16;
  if (lower == "f32" || lower == "float32" || lower == "float") return KvDtype::F32;
  if (lower == "fp8" || lower == "fp8_e4m3") return KvDtype::Fp8E4M3;
  if (lower == "fp8_e5m2") return KvDtype::Fp8E5M2;
  if (lower == "int8") return KvDtype::Int8;
  return std::nullopt;
}

std::string_view kv_cache_dtype_choices() { return "auto|f16|bf16|f32|fp8|fp8_e4m3|fp8_e5m2|int8"; }

KvDtype parse_kv_cache_dtype(const std::string& name) {
  if (const auto dtype = kv_dtype_from_name(name)) return *dtype;
  throw Error("--kv-cache-dtype '" + name + "' is not one of " +
              std::string(kv_cache_dtype_choices()));
}

size_t kv_element_bytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::F16:
    case KvDtype::BF16:
      return 2;
    case KvDtype::F32:
      return 4;
    case KvDtype::Fp8E4M3:
    case KvDtype::Fp8E5M2:
    case KvDtype::Int8:
      return 1;
  }
  return 0;
}

bool kv_dtype_has_scales(KvDtype dtype) { return kv_element_bytes(dtype) == 1; }

int64_t kv_bytes_per_token_head(KvDtype dtype, int head_dim) {
  return static_cast<int64_t>(head_dim) * static_cast<int64_t>(kv_element_bytes(dtype)) +
         (kv_dtype_has_scales(dtype) ? static_cast<int64_t>(kKvScaleBytes) : 0);
}

}  // namespace tern
