// The dispatch table: its type × level matrix (printed, for whoever wants to know which file
// runs), a level without kernels of its own inheriting the row below, and type_kernels
// answering from it.
#include "tern/kernels/cpu/kernel_table.h"

#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "kernels/kernel_test_util.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {
namespace {

bool same_kernels(const TypeKernels& a, const TypeKernels& b) {
  return a.weight == b.weight && a.activation == b.activation &&
         a.quantize_activation == b.quantize_activation && a.vec_dot == b.vec_dot &&
         a.vec_dot_rows == b.vec_dot_rows && a.gemm_tile == b.gemm_tile && a.gemm == b.gemm &&
         a.packed == b.packed;
}

TEST(KernelTable, PrintsTheTypeByLevelMatrix) {
  const std::string matrix = kernel_matrix();
  std::cout << matrix;
  EXPECT_NE(matrix.find("Q4_K"), std::string::npos);
#if defined(__x86_64__)
  EXPECT_NE(matrix.find("avx512/vec_dot_k + matmul_k_packed"), std::string::npos);
  EXPECT_NE(matrix.find("avx512/vec_dot_q4_0_q8_0 + amx/gemm_q"), std::string::npos);
#elif defined(__aarch64__)
  EXPECT_NE(matrix.find("dotprod/vec_dot_q + i8mm/gemm_tile_q"), std::string::npos);
  EXPECT_EQ(matrix.find("avx2"), std::string::npos);  // this build's levels only
#endif
  EXPECT_NE(matrix.find("Q3_K"), std::string::npos);
  EXPECT_EQ(matrix.find("Q8_K"), std::string::npos);  // an activation format: no line
}

TEST(KernelTable, ALevelWithoutItsOwnKernelsInheritsTheRowBelow) {
  for (int t = 0; t < kNumDTypes; ++t) {
    const auto weight = static_cast<DType>(t);
    if (kernel_row(weight, Isa::Scalar).kernels.vec_dot == nullptr) continue;
    EXPECT_EQ(kernel_row(weight, Isa::Scalar).from, Isa::Scalar);
    for (Isa isa : tern::testing::simd_levels()) {
      const KernelRow& row = kernel_row(weight, isa);
      const KernelRow& below = kernel_row(weight, isa_parent(isa));
      ASSERT_NE(row.kernels.vec_dot, nullptr) << dtype_name(weight);
      if (row.from != isa) {
        EXPECT_TRUE(same_kernels(row.kernels, below.kernels)) << dtype_name(weight);
        EXPECT_EQ(row.from, below.from);
      }
    }
  }
#if defined(__x86_64__)
  // Q4_K: its own kernels on every SIMD level.
  EXPECT_EQ(kernel_row(DType::Q4_K, Isa::Avx512).from, Isa::Avx512);
  EXPECT_EQ(kernel_row(DType::Q4_K, Isa::Amx).from, Isa::Amx);
  // Q5_1 has no 16-chain kernels: Amx runs Avx512's.
  EXPECT_EQ(kernel_row(DType::Q5_1, Isa::Amx).from, Isa::Avx512);
#elif defined(__aarch64__)
  // Q4_K: its own kernels on every ARM level (I8mm: Dotprod's vec_dot with smmla's tiles); F32
  // only Neon's. Q5_1 has no ARM kernels: every level runs the scalar twin.
  EXPECT_EQ(kernel_row(DType::Q4_K, Isa::Neon).from, Isa::Neon);
  EXPECT_EQ(kernel_row(DType::Q4_K, Isa::I8mm).from, Isa::I8mm);
  EXPECT_EQ(kernel_row(DType::F32, Isa::I8mm).from, Isa::Neon);
  EXPECT_EQ(kernel_row(DType::Q4_0, Isa::I8mm).from, Isa::I8mm);
  EXPECT_EQ(kernel_row(DType::Q5_1, Isa::I8mm).from, Isa::Scalar);
  // The lattice types: Neon's and Dotprod's own GEMV and tile; I8mm runs Dotprod's.
  EXPECT_EQ(kernel_row(DType::IQ2_XS, Isa::Neon).from, Isa::Neon);
  EXPECT_EQ(kernel_row(DType::IQ2_XS, Isa::I8mm).from, Isa::Dotprod);
  EXPECT_NE(kernel_row(DType::IQ2_XS, Isa::Dotprod).kernels.gemm_tile, nullptr);
  // Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4 likewise: a GEMM tile on Neon and Dotprod, each its own,
  // and I8mm runs Dotprod's.
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4}) {
    EXPECT_EQ(kernel_row(t, Isa::Neon).from, Isa::Neon) << dtype_name(t);
    EXPECT_EQ(kernel_row(t, Isa::Dotprod).from, Isa::Dotprod) << dtype_name(t);
    EXPECT_EQ(kernel_row(t, Isa::I8mm).from, Isa::Dotprod) << dtype_name(t);
    EXPECT_NE(kernel_row(t, Isa::Neon).kernels.gemm_tile, nullptr) << dtype_name(t);
    EXPECT_NE(kernel_row(t, Isa::Dotprod).kernels.gemm_tile, nullptr) << dtype_name(t);
    EXPECT_NE(kernel_row(t, Isa::Neon).kernels.gemm_tile,
              kernel_row(t, Isa::Dotprod).kernels.gemm_tile)
        << dtype_name(t);
  }
#endif
}

TEST(KernelTable, EachArchitectureHasItsOwnChainOfLevels) {
  for (Isa isa : isa_levels()) {
    EXPECT_TRUE(isa_includes(isa, Isa::Scalar)) << isa_name(isa);
    EXPECT_TRUE(isa_includes(isa, isa)) << isa_name(isa);
  }
  EXPECT_EQ(isa_levels().front(), Isa::Scalar);
  EXPECT_TRUE(isa_includes(Isa::Amx, Isa::Avx2));
  EXPECT_TRUE(isa_includes(Isa::I8mm, Isa::Neon));
  EXPECT_FALSE(isa_includes(Isa::Neon, Isa::Avx2));
  EXPECT_FALSE(isa_includes(Isa::Avx512, Isa::Amx));
  EXPECT_FALSE(isa_includes(Isa::I8mm, Isa::Avx512));
  // A level of the other architecture is never supported, so type_kernels refuses it.
  const Isa foreign = isa_levels().back() == Isa::Amx ? Isa::Neon : Isa::Avx2;
  EXPECT_FALSE(isa_supported(foreign));
}

TEST(KernelTable, TypeKernelsIsTheTable) {
  for (Isa isa : isa_levels()) {
    if (!isa_supported(isa)) continue;
    for (int t = 0; t < kNumDTypes; ++t) {
      const auto weight = static_cast<DType>(t);
      if (kernel_row(weight, isa).kernels.vec_dot == nullptr) continue;
      EXPECT_EQ(&type_kernels(weight, isa), &kernel_row(weight, isa).kernels)
          << dtype_name(weight) << " " << isa_name(isa);
    }
  }
}

// The other op families' rows: every level has every kernel, its own or the level below's.
TEST(KernelTable, EveryLevelHasEveryOpKernelItsOwnOrInherited) {
  const OpKernels& scalar = op_kernels(Isa::Scalar);
  EXPECT_EQ(scalar.f16_rows.to_f32, f16_to_f32_row_scalar);
  EXPECT_EQ(scalar.f16_rows.from_f32, f32_to_f16_row_scalar);
  EXPECT_EQ(scalar.read_blocks, read_blocks_scalar);
  EXPECT_EQ(scalar.silu_mul_row, silu_mul_row_scalar);
  for (Isa isa : isa_levels()) {
    const OpKernels& ops = op_kernels(isa);
    EXPECT_NE(ops.f16_rows.to_f32, nullptr) << isa_name(isa);
    EXPECT_NE(ops.f16_rows.from_f32, nullptr) << isa_name(isa);
    EXPECT_NE(ops.silu_mul_row, nullptr) << isa_name(isa);
    for (KvDtype dtype : {KvDtype::F16, KvDtype::BF16, KvDtype::F32, KvDtype::Fp8E4M3,
                          KvDtype::Fp8E5M2, KvDtype::Int8})
      EXPECT_NE(ops.attention.of(dtype), nullptr) << isa_name(isa) << " " << kv_dtype_name(dtype);
    EXPECT_NE(ops.kv_dequantize_int8, nullptr) << isa_name(isa);
    EXPECT_NE(ops.kv_dequantize_e4m3, nullptr) << isa_name(isa);
    EXPECT_NE(ops.kv_dequantize_e5m2, nullptr) << isa_name(isa);
    EXPECT_NE(ops.read_blocks, nullptr) << isa_name(isa);
  }
#if defined(__x86_64__)
  // Amx has no op kernels of its own; Avx2 no bandwidth loop.
  EXPECT_EQ(op_kernels(Isa::Amx).f16_rows.to_f32, op_kernels(Isa::Avx512).f16_rows.to_f32);
  EXPECT_EQ(op_kernels(Isa::Amx).kv_dequantize_int8, op_kernels(Isa::Avx512).kv_dequantize_int8);
  EXPECT_EQ(op_kernels(Isa::Avx2).read_blocks, read_blocks_scalar);
  EXPECT_EQ(op_kernels(Isa::Avx512).read_blocks, read_blocks_avx512);
  EXPECT_EQ(op_kernels(Isa::Amx).silu_mul_row, avx512_silu_mul_row);
  EXPECT_EQ(op_kernels(Isa::Amx).attention.of(KvDtype::F16),
            op_kernels(Isa::Avx512).attention.of(KvDtype::F16));
  EXPECT_NE(op_kernels(Isa::Avx2).attention.of(KvDtype::F16),
            op_kernels(Isa::Scalar).attention.of(KvDtype::F16));
#elif defined(__aarch64__)
  EXPECT_EQ(op_kernels(Isa::I8mm).f16_rows.to_f32, op_kernels(Isa::Neon).f16_rows.to_f32);
  EXPECT_EQ(op_kernels(Isa::I8mm).silu_mul_row, neon_silu_mul_row);
#endif
}

}  // namespace
}  // namespace tern::cpu
