#include "tern/core/dtype.h"

#include <array>
#include <cctype>
#include <limits>

namespace tern {
namespace {

// Block sizes are ggml's (ggml-common.h): e.g. Q4_0 = f16 scale + 16 bytes of nibbles. The
// INT*_G* blocks are an f32 scale, an f32 bias and the group's codes.
constexpr std::array<DTypeTraits, kNumDTypes> kTraits = {{
    {DType::F32, "F32", 1, 4, 0, "F32"},
    {DType::F16, "F16", 1, 2, 1, "F16"},
    {DType::BF16, "BF16", 1, 2, 30, "BF16"},
    {DType::F64, "F64", 1, 8, 28, "F64"},
    {DType::I8, "I8", 1, 1, 24, "I8"},
    {DType::I16, "I16", 1, 2, 25, "I16"},
    {DType::I32, "I32", 1, 4, 26, "I32"},
    {DType::I64, "I64", 1, 8, 27, "I64"},
    {DType::U8, "U8", 1, 1, -1, "U8"},
    {DType::Q4_0, "Q4_0", 32, 18, 2, ""},
    {DType::Q4_1, "Q4_1", 32, 20, 3, ""},
    {DType::Q5_0, "Q5_0", 32, 22, 6, ""},
    {DType::Q5_1, "Q5_1", 32, 24, 7, ""},
    {DType::Q8_0, "Q8_0", 32, 34, 8, ""},
    {DType::Q8_1, "Q8_1", 32, 36, 9, ""},
    {DType::Q2_K, "Q2_K", 256, 84, 10, ""},
    {DType::Q3_K, "Q3_K", 256, 110, 11, ""},
    {DType::Q4_K, "Q4_K", 256, 144, 12, ""},
    {DType::Q5_K, "Q5_K", 256, 176, 13, ""},
    {DType::Q6_K, "Q6_K", 256, 210, 14, ""},
    {DType::Q8_K, "Q8_K", 256, 292, 15, ""},
    {DType::U32, "U32", 1, 4, -1, "U32"},
    {DType::INT4_G32, "INT4_G32", 32, 8 + 16, -1, ""},
    {DType::INT4_G64, "INT4_G64", 64, 8 + 32, -1, ""},
    {DType::INT4_G128, "INT4_G128", 128, 8 + 64, -1, ""},
    {DType::INT8_G32, "INT8_G32", 32, 8 + 32, -1, ""},
    {DType::INT8_G64, "INT8_G64", 64, 8 + 64, -1, ""},
    {DType::INT8_G128, "INT8_G128", 128, 8 + 128, -1, ""},
    {DType::IQ4_NL, "IQ4_NL", 32, 18, 20, ""},
    {DType::IQ4_XS, "IQ4_XS", 256, 136, 23, ""},
    {DType::MXFP4, "MXFP4", 32, 17, 39, ""},
    {DType::IQ3_XXS, "IQ3_XXS", 256, 98, 18, ""},
    {DType::IQ3_S, "IQ3_S", 256, 110, 21, ""},
    {DType::IQ2_XXS, "IQ2_XXS", 256, 66, 16, ""},
    {DType::IQ2_XS, "IQ2_XS", 256, 74, 17, ""},
    {DType::IQ2_S, "IQ2_S", 256, 82, 22, ""},
    {DType::IQ1_S, "IQ1_S", 256, 50, 19, ""},
    {DType::IQ1_M, "IQ1_M", 256, 56, 29, ""},
}};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

const DTypeTraits& dtype_traits(DType dtype) { return kTraits[static_cast<size_t>(dtype)]; }

std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  for (const auto& t : kTraits)
    if (t.ggml_type >= 0 && static_cast<uint32_t>(t.ggml_type) == ggml_type) return t.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& t : kTraits)
    if (!t.safetensors.empty() && t.safetensors == name) return t.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& t : kTraits)
    if (iequals(t.name, name)) return t.dtype;
  return std::nullopt;
}

std::optional<AffineIntFormat> affine_int_format(DType dtype) {
  switch (dtype) {
    case DType::INT4_G32:
      return AffineIntFormat{4, 32};
    case DType::INT4_G64:
      return AffineIntFormat{4, 64};
    case DType::INT4_G128:
      return AffineIntFormat{4, 128};
    case DType::INT8_G32:
      return AffineIntFormat{8, 32};
    case DType::INT8_G64:
      return AffineIntFormat{8, 64};
    case DType::INT8_G128:
      return AffineIntFormat{8, 128};
    default:
      return std::nullopt;
  }
}

std::optional<DType> affine_int_dtype(int bits, int group) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto dtype = static_cast<DType>(i);
    const std::optional<AffineIntFormat> f = affine_int_format(dtype);
    if (f && f->bits == bits && f->group == group) return dtype;
  }
  return std::nullopt;
}

std::string_view ggml_type_name(uint32_t ggml_type) {
  static constexpr std::array<std::string_view, 40> kNames = {
      "F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
      "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
      "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
      "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
      "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
      "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  if (ggml_type < kNames.size()) return kNames[ggml_type];
  return "unknown";
}

std::optional<uint64_t> dtype_bytes(DType dtype, uint64_t nelements) {
  const auto& t = dtype_traits(dtype);
  if (nelements % static_cast<uint64_t>(t.block_elems) != 0) return std::nullopt;
  uint64_t blocks = nelements / static_cast<uint64_t>(t.block_elems);
  if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(t.block_bytes))
    return std::nullopt;
  return blocks * static_cast<uint64_t>(t.block_bytes);
}

}  // namespace tern
