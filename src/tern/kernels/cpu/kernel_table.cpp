// The dispatch table of the matmul kernels (kernel_table.h): what each level supplies per
// weight type, and the table that stacks the levels from Scalar up.
#include "tern/kernels/cpu/kernel_table.h"

#include <algorithm>
#include <array>
#include <string>

#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

constexpr int kNumIsas = 4;

DType activation_of(DType weight) {
  switch (weight) {
    // F16 weights take f32 activations: then only the weights need widening (one conversion
    // per FMA rather than two), and the activations are not rounded.
    case DType::F32:
    case DType::F16:
      return DType::F32;
    case DType::BF16:
      return weight;
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
      return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1:
      return DType::Q8_1;
    default:
      // The affine groups take Q8_0's 32-element blocks, which divide every group size.
      return affine_int_format(weight) ? DType::Q8_0 : DType::Q8_K;
  }
}

// What one level supplies for a weight type; vec_dot == nullptr: nothing, the type keeps the
// row of the level below. A level that supplies a vec_dot supplies the whole row, because its
// tiles, GEMM and packed kernels must reproduce exactly that vec_dot.
struct LevelKernels {
  VecDotFn vec_dot = nullptr;
  VecDotRowsFn vec_dot_rows = nullptr;
  GemmTileFn gemm_tile = nullptr;
  GemmTileFn gemm = nullptr;
  const PackedKernels* packed = nullptr;
  const char* source = nullptr;
};

LevelKernels scalar_level(DType t) {
  return {.vec_dot = scalar_vec_dot(t), .source = "generic/vec_dot"};
}

// The x86 levels: their kernels are built on x86-64 only (elsewhere the levels supply
// nothing, and detect_isa never reports them).
#if defined(__x86_64__)
LevelKernels avx2_level(DType t) {
  if (VecDotFn f = avx2_vec_dot_q(t))
    return {.vec_dot = f, .gemm_tile = avx2_gemm_tile_q(t), .source = "avx2/vec_dot_q"};
  if (VecDotFn f = avx2_vec_dot_k(t))
    return {.vec_dot = f, .gemm_tile = avx2_gemm_tile_k(t), .source = "avx2/vec_dot_k"};
  if (VecDotFn f = avx2_vec_dot_float(t)) return {.vec_dot = f, .source = "avx2/vec_dot_float"};
  if (VecDotFn f = avx2_vec_dot_affine(t))
    return {.vec_dot = f, .gemm_tile = avx2_gemm_tile_affine(t), .source = "avx2/vec_dot_affine"};
  return {};
}

LevelKernels avx512_level(DType t) {
  // Q4_0 and Q8_0 take the 16-chain arithmetic on both AVX-512 levels; without tiles, every
  // token count runs as passes of its VNNI dots.
  if (VecDotFn f = chains16_vec_dot_q(t))
    return {.vec_dot = f,
            .gemm = chains16_gemm_q(t),
            .packed = chains16_packed_q(t),
            .source = "chains16/vec_dot_q + matmul_q_packed"};
  // Q4_K, Q5_K and Q6_K likewise, on their packed layouts.
  if (const PackedKernels* packed = chains16_packed_k(t))
    return {.vec_dot = chains16_vec_dot_k(t),
            .gemm = chains16_gemm_k(t),
            .packed = packed,
            .source = "chains16/vec_dot_k + matmul_k_packed"};
  // The affine groups' scalar dot is already the 16-chain arithmetic the VNNI passes give.
  if (const PackedKernels* packed = chains16_packed_affine(t))
    return {.vec_dot = scalar_vec_dot_affine(t),
            .gemm = chains16_gemm_affine(t),
            .packed = packed,
            .source = "generic/vec_dot_affine + matmul_affine_packed"};
  if (VecDotFn f = avx512_vec_dot_q(t))
    return {.vec_dot = f, .gemm_tile = avx512_gemm_tile_q(t), .source = "avx512/vec_dot_q"};
  if (VecDotFn f = avx512_vec_dot_float(t))
    return {.vec_dot = f,
            .vec_dot_rows = avx512_vec_dot_rows_float(t),
            .gemm_tile = avx512_gemm_tile_float(t),
            .source = "avx512/vec_dot_float"};
  return {};
}

// The K types' 16-chain arithmetic only pays with tiles for the GEMM, so it is the Amx
// level's alone.
LevelKernels amx_level(DType t) {
  if (VecDotFn f = chains16_vec_dot_q(t))
    return {.vec_dot = f,
            .gemm = amx_gemm_q(t),
            .packed = amx_packed_q(t),
            .source = "chains16/vec_dot_q + amx/gemm_q"};
  if (VecDotFn f = chains16_vec_dot_k(t))
    return {.vec_dot = f,
            .gemm = amx_gemm_k(t),
            .packed = amx_packed_k(t),
            .source = "chains16/vec_dot_k + amx/gemm_k"};
  return {};
}

#else
LevelKernels avx2_level(DType) { return {}; }
LevelKernels avx512_level(DType) { return {}; }
LevelKernels amx_level(DType) { return {}; }
#endif

LevelKernels level_kernels(Isa isa, DType t) {
  switch (isa) {
    case Isa::Scalar:
      return scalar_level(t);
    case Isa::Avx2:
      return avx2_level(t);
    case Isa::Avx512:
      return avx512_level(t);
    case Isa::Amx:
      return amx_level(t);
  }
  return {};
}

struct KernelTable {
  // rows[isa][dtype]
  std::array<std::array<KernelRow, kNumDTypes>, kNumIsas> rows{};
  KernelTable() {
    for (int t = 0; t < kNumDTypes; ++t) {
      const auto weight = static_cast<DType>(t);
      if (scalar_vec_dot(weight) == nullptr) {
        for (int i = 0; i < kNumIsas; ++i)
          rows[i][t].kernels = {.weight = weight,
                                .activation = activation_of(weight),
                                .quantize_activation = nullptr,
                                .vec_dot = nullptr,
                                .gemm_tile = nullptr};
        continue;
      }
      for (int i = 0; i < kNumIsas; ++i) {
        const LevelKernels own = level_kernels(static_cast<Isa>(i), weight);
        KernelRow& row = rows[i][t];
        if (own.vec_dot == nullptr) {
          row = rows[i - 1][t];  // Scalar always supplies one
          continue;
        }
        const DType activation = activation_of(weight);
        row.kernels = {.weight = weight,
                       .activation = activation,
                       .quantize_activation = scalar_quantize_activation(activation),
                       .vec_dot = own.vec_dot,
                       .vec_dot_rows = own.vec_dot_rows,
                       .gemm_tile = own.gemm_tile,
                       .gemm = own.gemm,
                       .packed = own.packed};
        row.source = own.source;
        row.from = static_cast<Isa>(i);
      }
    }
  }
};

const KernelTable& table() {
  static const KernelTable t;
  return t;
}

}  // namespace

const KernelRow& kernel_row(DType weight, Isa isa) {
  return table().rows[static_cast<int>(isa)][static_cast<int>(weight)];
}

std::string kernel_matrix() {
  std::array<std::array<std::string, kNumIsas + 1>, kNumDTypes + 1> cells;
  cells[0][0] = "type";
  for (int i = 0; i < kNumIsas; ++i) cells[0][i + 1] = isa_name(static_cast<Isa>(i));
  int lines = 1;
  for (int t = 0; t < kNumDTypes; ++t) {
    const auto weight = static_cast<DType>(t);
    if (kernel_row(weight, Isa::Scalar).kernels.vec_dot == nullptr) continue;
    cells[lines][0] = dtype_name(weight);
    for (int i = 0; i < kNumIsas; ++i) {
      const KernelRow& row = kernel_row(weight, static_cast<Isa>(i));
      std::string& cell = cells[lines][i + 1];
      cell = row.from == static_cast<Isa>(i) ? row.source : std::string("= ") + isa_name(row.from);
    }
    ++lines;
  }
  std::array<size_t, kNumIsas + 1> width{};
  for (int l = 0; l < lines; ++l)
    for (int c = 0; c <= kNumIsas; ++c) width[c] = std::max(width[c], cells[l][c].size());
  std::string out;
  for (int l = 0; l < lines; ++l) {
    for (int c = 0; c <= kNumIsas; ++c) {
      out += cells[l][c];
      if (c < kNumIsas) out += std::string(width[c] - cells[l][c].size() + 2, ' ');
    }
    out += '\n';
  }
  return out;
}

}  // namespace tern::cpu
