// Helpers shared by the K-type files of the 16-chain levels (avx512/vec_dot_k.cpp: the
// arithmetic and its GEMV; matmul_k_packed.cpp, matmul_q6_k_packed.cpp: the packed
// matmuls; amx/gemm_k.cpp: the GEMM on tiles) and only them. Internal linkage, so each compiles
// its own copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512/chains.h"
#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {
namespace {

constexpr int kChunk = 64;  // elements per AMX tile product (a tile row of 64 int8)
constexpr int kChunks = kQKK / kChunk;

// int16 index vector: lanes 0-15 = lo, lanes 16-31 = hi.
inline __m512i halves16(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(lo)),
                            _mm256_set1_epi16(static_cast<int16_t>(hi)), 1);
}
// `pshufb` control for one int16 lane: byte `b` zero-extended.
constexpr int16_t zx(int b) { return static_cast<int16_t>(0x8000 | b); }

template <class Block>
constexpr bool kHasMins = !std::is_same_v<Block, BlockQ6_K>;

// The 16 × 16 floats of r transposed (r[i] lane j → out[j] lane i): 4 rounds of 16 shuffles.
inline void transpose16(const __m512* r, __m512* out) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: a0 b0 a1 b1 / a2 b2 a3 b3
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // u[4i + j], 128-bit lane L: column 4L + j of rows 4i..4i+3
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    // 128-bit lanes 0 and 2 (0x88) or 1 and 3 (0xDD) of rows 0-7 and of rows 8-15 …
    const __m512 even_lo = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
    const __m512 even_hi = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 odd_lo = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
    const __m512 odd_hi = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    // … give columns j, 8 + j (from lanes 0, 2) and 4 + j, 12 + j (lanes 1, 3).
    out[j] = _mm512_shuffle_f32x4(even_lo, even_hi, 0x88);
    out[8 + j] = _mm512_shuffle_f32x4(even_lo, even_hi, 0xDD);
    out[4 + j] = _mm512_shuffle_f32x4(odd_lo, odd_hi, 0x88);
    out[12 + j] = _mm512_shuffle_f32x4(odd_lo, odd_hi, 0xDD);
  }
}

// The most tokens avx512/gemm_k_few_tokens.cpp takes (its per-token chains live on the stack).
constexpr int kMaxFewTokens = 15;

}  // namespace

// Q4_K weights packed for the GEMV (avx512/matmul_k_packed.cpp): group g's `rows` rows restored
// to the file's layout, out: [rows][nb] blocks.
void restore_q4_k_rows(const void* packed, int64_t group, int64_t nb, int rows, BlockQ4_K* out);
// The matmuls on weights packed in groups of 16 rows, every token count as VNNI dots
// (avx512/packed_matmul.h), and their GEMMs on the file's rows, which pack per call.
const PackedKernels* chains16_packed_q4_k();
GemmTileFn chains16_gemm_q4_k();
const PackedKernels* chains16_packed_q5_k();
GemmTileFn chains16_gemm_q5_k();
const PackedKernels* chains16_packed_q6_k();
GemmTileFn chains16_gemm_q6_k();
// The GEMM (amx/gemm_k.cpp, ≥ 16 tokens) on such packed weights, each tile's rows restored
// by the thread that multiplies them. Same contract as a GemmTileFn.
void amx_gemm_q4_k_packed(int64_t k, const void* packed, int64_t rows, const void* a_data,
                          size_t a_stride, int64_t tokens, float* y, size_t ldy);

// The GEMV's values for tokens ≤ kMaxFewTokens with each weight super-block unpacked once
// (avx512/gemm_k_few_tokens.cpp), for the GEMM below its tile threshold. Block: Q4_K, Q5_K, Q6_K.
//   w_data [rows] rows of k / 256 blocks, w_stride bytes apart; a_data [tokens] Q8_K rows
//   a_stride bytes apart; y [tokens][ldy], rows 0..rows-1 of each written.
template <class Block>
void amx_gemm_k_few_tokens(int64_t k, const std::byte* w_data, size_t w_stride, int64_t rows,
                           const std::byte* a_data, size_t a_stride, int64_t tokens, float* y,
                           size_t ldy);
}  // namespace tern::cpu
