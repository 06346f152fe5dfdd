// Helpers shared by the AMX level's K-type files (vec_dot_k_amx.cpp: the arithmetic and its
// GEMV; gemm_k_amx.cpp: the GEMM) and only them. Internal linkage, so each compiles its own copy.
#pragma once

#include <immintrin.h>

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

}  // namespace
}  // namespace tern::cpu
