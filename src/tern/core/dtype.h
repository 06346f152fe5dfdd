// Element types of weights and activations. Quantized types keep ggml's block layouts, so a
// tensor of such a type is `nelements / block_elems` blocks of `block_bytes` bytes each; the
// INT4_G*/INT8_G* types are tern's own (the groups of GPTQ, AWQ and MLX checkpoints, which no
// ggml type holds exactly).
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
  U32,
  // x = scale · q + bias per group of 32, 64 or 128 elements, q unsigned
  // (blocks/block_layouts.h: BlockAffine).
  INT4_G32,
  INT4_G64,
  INT4_G128,
  INT8_G32,
  INT8_G64,
  INT8_G128,
  // ggml's non-linear 4-bit types: x = d · kIq4Levels[q] per block of 32 (IQ4_NL), or with a
  // 6-bit scale per 32 under one f16 per 256 (IQ4_XS) (blocks/block_layouts.h).
  IQ4_NL,
  IQ4_XS,
  // OCP's microscaling FP4 (gpt-oss's experts): x = 2^(e − 128) · kMxfp4Levels[q] per block of
  // 32, the levels e2m1's values doubled (blocks/block_layouts.h).
  MXFP4,
  // ggml's 3-bit lattice types: per super-block of 256 an f16 d and per sub-block of 32 a 4-bit
  // scale; each group of 4 elements a grid entry of 4 magnitudes (an 8-bit index into 256,
  // IQ3_XXS; 9-bit into 512, IQ3_S), each element a sign (blocks/block_layouts.h). Read and
  // multiplied; tern does not write them (llama-quantize's grid search).
  IQ3_XXS,
  IQ3_S,
  // ggml's 2-bit lattice types: per super-block of 256 an f16 d and per 32 (IQ2_XXS) or 16
  // (IQ2_XS, IQ2_S) elements a 4-bit scale; each group of 8 elements a grid entry of 8
  // magnitudes (an 8-, 9- or 10-bit index), each element a sign (blocks/block_layouts.h). Read
  // and multiplied; tern does not write them (llama-quantize's grid search).
  IQ2_XXS,
  IQ2_XS,
  IQ2_S,
  // ggml's 1-bit lattice types: per sub-block of 32 a 3-bit scale, each group of 8 elements an
  // 11-bit index into a grid of 2048 entries of 8 values in {−1, 0, 1}, shifted by ±1/8 (a sign
  // per sub-block, IQ1_S; per group, IQ1_M, whose scales are per 16 and whose f16 d is spread
  // over the scale bytes' top nibbles) (blocks/block_layouts.h). Read and multiplied; tern does
  // not write them (llama-quantize's grid search).
  IQ1_S,
  IQ1_M,
};
// One past the last enumerator: loops over every type go to it.
inline constexpr int kNumDTypes = static_cast<int>(DType::IQ1_M) + 1;

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

// The bits (4 or 8) and group size (32, 64 or 128) of an INT*_G* type; nullopt for others.
struct AffineIntFormat {
  int bits;
  int group;
};
std::optional<AffineIntFormat> affine_int_format(DType dtype);
// The INT*_G* type of `bits` and `group`; nullopt when tern has none.
std::optional<DType> affine_int_dtype(int bits, int group);

// ggml's name for a type id, including ones tern does not load ("IQ2_XXS"), for error messages.
std::string_view ggml_type_name(uint32_t ggml_type);

// Bytes of `nelements` elements of `dtype`; nullopt when nelements is not a whole number of
// blocks or the size would overflow.
std::optional<uint64_t> dtype_bytes(DType dtype, uint64_t nelements);

}  // namespace tern
