// Helpers shared by the AMX level's K-type files (vec_dot_k_amx.cpp: the arithmetic and its
// GEMV; gemm_k_amx.cpp: the GEMM) and only them. Internal linkage, so each compiles its own copy.
#pragma once

#include "tern/kernels/cpu/avx512_intrinsics.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "tern/kernels/cpu/quant_blocks.h"

namespace tern::cpu {
namespace {

constexpr int kChains = 16;  // = lanes of a register = rows and tokens of a tile
constexpr int kChunk = 64;   // elements per AMX tile product (a tile row of 64 int8)
constexpr int kChunks = kQKK / kChunk;

inline float f16(uint16_t h) { return _cvtsh_ss(h); }

// int16 index vector: lanes 0-15 = lo, lanes 16-31 = hi.
inline __m512i halves16(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(lo)), _mm256_set1_epi16(static_cast<int16_t>(hi)),
                            1);
}
// `pshufb` control for one int16 lane: byte `b` zero-extended.
constexpr int16_t zx(int b) { return static_cast<int16_t>(0x8000 | b); }

template <class Block>
constexpr bool kHasMins = !std::is_same_v<Block, BlockQ6_K>;

// The most tokens gemm_k_few_tokens_amx.cpp takes (its per-token chains live on the stack).
constexpr int kMaxFewTokens = 15;

}  // namespace

// The GEMV's values for tokens ≤ kMaxFewTokens with each weight super-block unpacked once
// (gemm_k_few_tokens_amx.cpp), for the GEMM below its tile threshold. Block: Q4_K, Q5_K, Q6_K.
//   w_data [rows] rows of k / 256 blocks, w_stride bytes apart; a_data [tokens] Q8_K rows
//   a_stride bytes apart; y [tokens][ldy], rows 0..rows-1 of each written.
// Q4_K weights packed for the GEMV (matmul_k_packed_amx.cpp): group g's `rows` rows restored
// to the file's layout, out: [rows][nb] blocks.
void restore_q4_k_rows(const void* packed, int64_t group, int64_t nb, int rows, BlockQ4_K* out);
// The GEMM (gemm_k_amx.cpp, ≥ 16 tokens) on such packed weights, each tile's rows restored
// by the thread that multiplies them. Same contract as a GemmTileFn.
void amx_gemm_q4_k_packed(int64_t k, const void* packed, int64_t rows, const void* a_data, size_t a_stride,
                          int64_t tokens, float* y, size_t ldy);

template <class Block>
void amx_gemm_k_few_tokens(int64_t k, const std::byte* w_data, size_t w_stride, int64_t rows,
                           const std::byte* a_data, size_t a_stride, int64_t tokens, float* y, size_t ldy);
}  // namespace tern::cpu
