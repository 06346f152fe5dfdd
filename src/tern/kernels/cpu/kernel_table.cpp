// The dispatch table (kernel_table.h): what each level supplies per weight type and per op
// family, and the tables that stack the levels from Scalar up.
#include "tern/kernels/cpu/kernel_table.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "tern/kernels/cpu/vec_dot_isa.h"

namespace tern::cpu {
namespace {

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
    case DType::IQ4_NL:
    case DType::MXFP4:
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
  if (VecDotFn f = avx2_vec_dot_k2_k3(t))
    return {.vec_dot = f, .gemm_tile = avx2_gemm_tile_k2_k3(t), .source = "avx2/vec_dot_k2_k3"};
  if (VecDotFn f = avx2_vec_dot_iq4(t))
    return {.vec_dot = f, .gemm_tile = avx2_gemm_tile_iq4(t), .source = "avx2/vec_dot_iq4"};
  if (VecDotFn f = avx2_vec_dot_lattice(t))
    return {.vec_dot = f, .gemm_tile = avx2_gemm_tile_lattice(t), .source = "avx2/vec_dot_lattice"};
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
            .source = "avx512/vec_dot_q4_0_q8_0 + matmul_q_packed"};
  // Q4_K, Q5_K and Q6_K likewise, on their packed layouts.
  if (const PackedKernels* packed = chains16_packed_k(t))
    return {.vec_dot = chains16_vec_dot_k(t),
            .gemm = chains16_gemm_k(t),
            .packed = packed,
            .source = "avx512/vec_dot_k + matmul_k_packed"};
  // The affine groups' scalar dot is already the 16-chain arithmetic the VNNI passes give.
  if (const PackedKernels* packed = chains16_packed_affine(t))
    return {.vec_dot = scalar_vec_dot_affine(t),
            .gemm = chains16_gemm_affine(t),
            .packed = packed,
            .source = "generic/vec_dot_affine + matmul_affine_packed"};
  if (VecDotFn f = avx512_vec_dot_q(t))
    return {.vec_dot = f, .gemm_tile = avx512_gemm_tile_q(t), .source = "avx512/vec_dot_q"};
  if (VecDotFn f = avx512_vec_dot_k2_k3(t))
    return {.vec_dot = f,
            .vec_dot_rows = avx512_vec_dot_rows_k2_k3(t),
            .gemm_tile = avx512_gemm_tile_k2_k3(t),
            .source = "avx512/vec_dot_k2_k3"};
  if (VecDotFn f = avx512_vec_dot_iq4(t))
    return {.vec_dot = f,
            .vec_dot_rows = avx512_vec_dot_rows_iq4(t),
            .gemm_tile = avx512_gemm_tile_iq4(t),
            .source = "avx512/vec_dot_iq4"};
  if (VecDotFn f = avx512_vec_dot_lattice(t))
    return {
        .vec_dot = f, .gemm_tile = avx512_gemm_tile_lattice(t), .source = "avx512/vec_dot_lattice"};
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
            .source = "avx512/vec_dot_q4_0_q8_0 + amx/gemm_q"};
  if (VecDotFn f = chains16_vec_dot_k(t))
    return {.vec_dot = f,
            .gemm = amx_gemm_k(t),
            .packed = amx_packed_k(t),
            .source = "avx512/vec_dot_k + amx/gemm_k"};
  return {};
}

#else
LevelKernels avx2_level(DType) { return {}; }
LevelKernels avx512_level(DType) { return {}; }
LevelKernels amx_level(DType) { return {}; }
#endif

// The ARM levels (built on aarch64 only): each reproduces the 16-chain arithmetic of the
// AVX-512 level for the types it covers (generic/vec_dot_16lane.cpp states it), so a type
// one level covers, every level above covers too with the same values.
#if defined(__aarch64__)
LevelKernels neon_level(DType t) {
  if (VecDotFn f = neon_vec_dot_q(t)) return {.vec_dot = f, .source = "neon/vec_dot_q"};
  if (VecDotFn f = neon_vec_dot_k(t)) return {.vec_dot = f, .source = "neon/vec_dot_k"};
  if (VecDotFn f = neon_vec_dot_float(t)) return {.vec_dot = f, .source = "neon/vec_dot_float"};
  if (VecDotFn f = neon_vec_dot_k2_k3(t))
    return {.vec_dot = f, .gemm_tile = neon_gemm_tile_k2_k3(t), .source = "neon/vec_dot_k2_k3"};
  if (VecDotFn f = neon_vec_dot_iq4(t))
    return {.vec_dot = f, .gemm_tile = neon_gemm_tile_iq4(t), .source = "neon/vec_dot_iq4"};
  if (VecDotFn f = neon_vec_dot_lattice(t))
    return {.vec_dot = f, .gemm_tile = neon_gemm_tile_lattice(t), .source = "neon/vec_dot_lattice"};
  return {};
}

LevelKernels dotprod_level(DType t) {
  if (VecDotFn f = dotprod_vec_dot_q(t)) return {.vec_dot = f, .source = "dotprod/vec_dot_q"};
  if (VecDotFn f = dotprod_vec_dot_k(t)) return {.vec_dot = f, .source = "dotprod/vec_dot_k"};
  if (VecDotFn f = dotprod_vec_dot_k2_k3(t))
    return {
        .vec_dot = f, .gemm_tile = dotprod_gemm_tile_k2_k3(t), .source = "dotprod/vec_dot_k2_k3"};
  if (VecDotFn f = dotprod_vec_dot_iq4(t))
    return {.vec_dot = f, .gemm_tile = dotprod_gemm_tile_iq4(t), .source = "dotprod/vec_dot_iq4"};
  if (VecDotFn f = dotprod_vec_dot_lattice(t))
    return {.vec_dot = f,
            .gemm_tile = dotprod_gemm_tile_lattice(t),
            .source = "dotprod/vec_dot_lattice"};
  return {};
}

// smmla's GEMM tiles, with Dotprod's GEMV (a tile needs two tokens to pay).
LevelKernels i8mm_level(DType t) {
  if (GemmTileFn tile = i8mm_gemm_tile_q(t))
    return {.vec_dot = dotprod_vec_dot_q(t),
            .gemm_tile = tile,
            .source = "dotprod/vec_dot_q + i8mm/gemm_tile_q"};
  if (GemmTileFn tile = i8mm_gemm_tile_k(t))
    return {.vec_dot = dotprod_vec_dot_k(t),
            .gemm_tile = tile,
            .source = "dotprod/vec_dot_k + i8mm/gemm_tile_k"};
  return {};
}
#else
LevelKernels neon_level(DType) { return {}; }
LevelKernels dotprod_level(DType) { return {}; }
LevelKernels i8mm_level(DType) { return {}; }
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
    case Isa::Neon:
      return neon_level(t);
    case Isa::Dotprod:
      return dotprod_level(t);
    case Isa::I8mm:
      return i8mm_level(t);
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
          // Scalar always supplies one, and every parent comes before its children.
          row = rows[static_cast<int>(isa_parent(static_cast<Isa>(i)))][t];
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

// What one level supplies of the other op families; a null entry keeps the level below's.
// Scalar supplies every one (the twins).
OpKernels level_ops(Isa isa) {
  auto kv = [](KvDequantizeFn (*of)(KvDtype)) {
    return OpKernels{.f16_rows = {},
                     .silu_mul_row = nullptr,
                     .attention = {},
                     .kv_dequantize_int8 = of(KvDtype::Int8),
                     .kv_dequantize_e4m3 = of(KvDtype::Fp8E4M3),
                     .kv_dequantize_e5m2 = of(KvDtype::Fp8E5M2),
                     .read_blocks = nullptr};
  };
  OpKernels ops{};
  switch (isa) {
    case Isa::Scalar:
      ops = kv(scalar_kv_dequantize);
      ops.f16_rows = {f16_to_f32_row_scalar, f32_to_f16_row_scalar};
      ops.silu_mul_row = silu_mul_row_scalar;
      ops.attention = scalar_attention_kernels();
      ops.read_blocks = read_blocks_scalar;
      break;
#if defined(__x86_64__)
    case Isa::Avx2:
      ops = kv(avx2_kv_dequantize);
      ops.f16_rows = {avx2_f16_to_f32_row, avx2_f32_to_f16_row};
      ops.silu_mul_row = avx2_silu_mul_row;
      ops.attention = avx2_attention_kernels();
      break;
    case Isa::Avx512:
      ops = kv(avx512_kv_dequantize);
      ops.f16_rows = {avx512_f16_to_f32_row, avx512_f32_to_f16_row};
      ops.silu_mul_row = avx512_silu_mul_row;
      ops.attention = avx512_attention_kernels();
      ops.read_blocks = read_blocks_avx512;
      break;
#elif defined(__aarch64__)
    // Every ARM level runs Neon's (the others add integer dots only).
    case Isa::Neon:
      ops = kv(neon_kv_dequantize);
      ops.f16_rows = {neon_f16_to_f32_row, neon_f32_to_f16_row};
      ops.silu_mul_row = neon_silu_mul_row;
      ops.attention = neon_attention_kernels();
      break;
#endif
    default:
      break;
  }
  return ops;
}

struct OpTable {
  std::array<OpKernels, kNumIsas> levels{};
  OpTable() {
    for (int i = 0; i < kNumIsas; ++i) {
      const auto isa = static_cast<Isa>(i);
      OpKernels own = level_ops(isa);
      if (isa != Isa::Scalar) {
        // Every parent comes before its children.
        const OpKernels& parent = levels[static_cast<int>(isa_parent(isa))];
        if (own.f16_rows.to_f32 == nullptr) own.f16_rows = parent.f16_rows;
        if (own.silu_mul_row == nullptr) own.silu_mul_row = parent.silu_mul_row;
        // A level supplies attention for every cache dtype or for none.
        if (own.attention.of(KvDtype::F16) == nullptr) own.attention = parent.attention;
        if (own.kv_dequantize_int8 == nullptr) own.kv_dequantize_int8 = parent.kv_dequantize_int8;
        if (own.kv_dequantize_e4m3 == nullptr) own.kv_dequantize_e4m3 = parent.kv_dequantize_e4m3;
        if (own.kv_dequantize_e5m2 == nullptr) own.kv_dequantize_e5m2 = parent.kv_dequantize_e5m2;
        if (own.read_blocks == nullptr) own.read_blocks = parent.read_blocks;
      }
      levels[i] = own;
    }
  }
};

}  // namespace

const KernelRow& kernel_row(DType weight, Isa isa) {
  return table().rows[static_cast<int>(isa)][static_cast<int>(weight)];
}

const OpKernels& op_kernels(Isa isa) {
  static const OpTable t;
  return t.levels[static_cast<int>(isa)];
}

std::string kernel_matrix() {
  const std::vector<Isa>& levels = isa_levels();
  const size_t columns = levels.size() + 1;
  std::vector<std::vector<std::string>> cells(1, std::vector<std::string>(columns));
  cells[0][0] = "type";
  for (size_t c = 1; c < columns; ++c) cells[0][c] = isa_name(levels[c - 1]);
  for (int t = 0; t < kNumDTypes; ++t) {
    const auto weight = static_cast<DType>(t);
    if (kernel_row(weight, Isa::Scalar).kernels.vec_dot == nullptr) continue;
    std::vector<std::string>& line = cells.emplace_back(columns);
    line[0] = dtype_name(weight);
    for (size_t c = 1; c < columns; ++c) {
      const KernelRow& row = kernel_row(weight, levels[c - 1]);
      line[c] = row.from == levels[c - 1] ? row.source : std::string("= ") + isa_name(row.from);
    }
  }
  std::vector<size_t> width(columns);
  for (const auto& line : cells)
    for (size_t c = 0; c < columns; ++c) width[c] = std::max(width[c], line[c].size());
  std::string out;
  for (const auto& line : cells) {
    for (size_t c = 0; c < columns; ++c) {
      out += line[c];
      if (c + 1 < columns) out += std::string(width[c] - line[c].size() + 2, ' ');
    }
    out += '\n';
  }
  return out;
}

}  // namespace tern::cpu
