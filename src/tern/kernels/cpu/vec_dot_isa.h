// Where the dispatch table (kernel_table.cpp) finds each instruction set's kernels. Each family
// of weight types has its own file per ISA (x86's below; ARM's further down):
// {avx2,avx512}/vec_dot_q.cpp for the 32-element types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; AVX-512's
// Q4_0 and Q8_0 in avx512/vec_dot_q4_0_q8_0.cpp), {avx2,avx512}/vec_dot_k.cpp for Q4_K, Q5_K, Q6_K,
// {avx2,avx512}/vec_dot_float.cpp for F32, F16, BF16. A getter returns nullptr for a type its
// family does not cover; the table then keeps the next lower level's row.
#pragma once

#include "tern/core/dtype.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {

// The scalar reference of every supported type (generic/vec_dot.cpp).
VecDotFn scalar_vec_dot(DType weight);
// The 16-chain arithmetic of the AVX-512 levels written in plain C++ (generic/
// vec_dot_16lane.cpp): Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, F32, F16 and BF16; nullptr for others. The
// AVX-512 and ARM kernels of these types equal it bit for bit, which the tests check on both.
VecDotFn lanes16_vec_dot(DType weight);
// The INT4_G* and INT8_G* types' (generic/vec_dot_affine.cpp), which scalar_vec_dot returns.
VecDotFn scalar_vec_dot_affine(DType weight);
QuantizeRowFn scalar_quantize_activation(DType activation);

VecDotFn avx2_vec_dot_q(DType weight);
VecDotFn avx512_vec_dot_q(DType weight);
VecDotFn avx2_vec_dot_k(DType weight);
// Q2_K and Q3_K ({avx2,avx512}/vec_dot_k2_k3.cpp), bit for bit scalar_vec_dot; the Amx level
// inherits the Avx512 level's.
VecDotFn avx2_vec_dot_k2_k3(DType weight);
VecDotFn avx512_vec_dot_k2_k3(DType weight);
VecDotRowsFn avx512_vec_dot_rows_k2_k3(DType weight);
// IQ4_NL, IQ4_XS and MXFP4 ({avx2,avx512}/vec_dot_iq4.cpp; MXFP4 runs IQ4_NL's kernels with its
// own levels and scale), bit for bit scalar_vec_dot; the Amx level inherits the Avx512 level's.
VecDotFn avx2_vec_dot_iq4(DType weight);
VecDotFn avx512_vec_dot_iq4(DType weight);
VecDotRowsFn avx512_vec_dot_rows_iq4(DType weight);
// The lattice types, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and IQ1_M
// ({avx2,avx512}/vec_dot_lattice.cpp: superblock_steps.h's GEMV and tile), bit for bit
// scalar_vec_dot; the Amx level inherits the Avx512 level's. The ARM levels' are
// {neon,dotprod}/vec_dot_lattice.cpp (below).
VecDotFn avx2_vec_dot_lattice(DType weight);
VecDotFn avx512_vec_dot_lattice(DType weight);
GemmTileFn avx2_gemm_tile_lattice(DType weight);
GemmTileFn avx512_gemm_tile_lattice(DType weight);
// The affine groups (INT4_G*, INT8_G*), bit for bit scalar_vec_dot_affine
// (avx2/vec_dot_affine.cpp).
VecDotFn avx2_vec_dot_affine(DType weight);
VecDotFn avx2_vec_dot_float(DType weight);
VecDotFn avx512_vec_dot_float(DType weight);
// kVecDotRows rows at once, bit-identical to the same ISA's vec_dot; nullptr for a type without.
VecDotRowsFn avx512_vec_dot_rows_float(DType weight);

// GEMM tiles (bit-identical to the same ISA's vec_dot); nullptr for a type without one.
GemmTileFn avx512_gemm_tile_q(DType weight);
GemmTileFn avx512_gemm_tile_float(DType weight);
GemmTileFn avx2_gemm_tile_q(DType weight);
GemmTileFn avx2_gemm_tile_k(DType weight);
GemmTileFn avx2_gemm_tile_k2_k3(DType weight);
GemmTileFn avx512_gemm_tile_k2_k3(DType weight);
GemmTileFn avx2_gemm_tile_iq4(DType weight);
GemmTileFn avx512_gemm_tile_iq4(DType weight);
GemmTileFn avx2_gemm_tile_affine(DType weight);

// The 16-chain arithmetic (the chains16_ getters, in arch/x86/avx512/): Q4_0 and Q8_0 with their
// own GEMV (avx512/vec_dot_q4_0_q8_0.cpp) on both AVX-512 levels, and matmuls on weights packed in
// groups of 16 rows that agree with it bit for bit: every token count as VNNI dots on the Avx512
// level (avx512/matmul_q_packed.cpp), AMX tiles from 27 tokens on the Amx level (amx/gemm_q.cpp).
VecDotFn chains16_vec_dot_q(DType weight);
// The affine groups (INT4_G*, INT8_G*) on both AVX-512 levels: scalar_vec_dot_affine is their
// vec_dot (its arithmetic is the 16-chain form), and these VNNI passes every matmul
// (avx512/matmul_affine_packed.cpp).
GemmTileFn chains16_gemm_affine(DType weight);
const PackedKernels* chains16_packed_affine(DType weight);
GemmTileFn chains16_gemm_q(DType weight);
const PackedKernels* chains16_packed_q(DType weight);
GemmTileFn amx_gemm_q(DType weight);
const PackedKernels* amx_packed_q(DType weight);
// Q4_K, Q5_K and Q6_K likewise (avx512/vec_dot_k.cpp: the arithmetic and GEMV; amx/gemm_k.cpp:
// the GEMM on tiles, Amx level). Q4_K's weights packed in groups of 16 rows and their matmul
// (avx512/matmul_k_packed.cpp): every token count as VNNI dots on the Avx512 level (weights
// in the file's layout packed per call by its gemm), AMX tiles beyond 32 tokens on the Amx level.
VecDotFn chains16_vec_dot_k(DType weight);
GemmTileFn chains16_gemm_k(DType weight);
const PackedKernels* chains16_packed_k(DType weight);
GemmTileFn amx_gemm_k(DType weight);
const PackedKernels* amx_packed_k(DType weight);
// The ARM levels (arch/arm/): each of these equals lanes16_vec_dot bit for bit, or for Q2_K,
// Q3_K, the IQ4 family and the lattice types the scalar twin. neon/: Q4_0, Q8_0 (vec_dot_q),
// Q4_K, Q5_K, Q6_K (vec_dot_k), F32, F16, BF16 (vec_dot_float), Q2_K, Q3_K (vec_dot_k2_k3),
// IQ4_NL, IQ4_XS, MXFP4 (vec_dot_iq4), IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M
// (vec_dot_lattice, with a 4-token GEMM tile) with widening multiplies; dotprod/: the integer
// types with sdot; i8mm/: GEMM tiles of Q4_0, Q8_0 and the K types with smmla (2 rows × 2 tokens
// per instruction).
VecDotFn neon_vec_dot_q(DType weight);
VecDotFn neon_vec_dot_k(DType weight);
VecDotFn neon_vec_dot_float(DType weight);
VecDotFn neon_vec_dot_k2_k3(DType weight);
GemmTileFn neon_gemm_tile_k2_k3(DType weight);
VecDotFn neon_vec_dot_iq4(DType weight);
GemmTileFn neon_gemm_tile_iq4(DType weight);
VecDotFn neon_vec_dot_lattice(DType weight);
GemmTileFn neon_gemm_tile_lattice(DType weight);
VecDotFn dotprod_vec_dot_q(DType weight);
VecDotFn dotprod_vec_dot_k(DType weight);
VecDotFn dotprod_vec_dot_k2_k3(DType weight);
GemmTileFn dotprod_gemm_tile_k2_k3(DType weight);
VecDotFn dotprod_vec_dot_iq4(DType weight);
GemmTileFn dotprod_gemm_tile_iq4(DType weight);
VecDotFn dotprod_vec_dot_lattice(DType weight);
GemmTileFn dotprod_gemm_tile_lattice(DType weight);
GemmTileFn i8mm_gemm_tile_q(DType weight);
GemmTileFn i8mm_gemm_tile_k(DType weight);

// Asks Linux for the AMX tile state (arch_prctl); false where the OS refuses it.
bool request_amx_permission();

}  // namespace tern::cpu
