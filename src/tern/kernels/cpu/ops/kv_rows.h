// How attention reads a chunk's K and V rows, 16 floats at a time, from the cache as it holds
// them (f16, bf16, f32, 8-bit codes) or from the f32 copies a work item makes of them. Only
// ops/attention.cpp includes it; internal linkage.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tern/core/half.h"
#include "tern/kernels/cpu/kv/kv_dtype.h"
#include "tern/kernels/cpu/kv/kv_quant.h"
#include "tern/kernels/cpu/ops/attention.h"
#include "tern/kernels/cpu/ops/lanes16.h"

namespace tern::cpu {
namespace {

// Where a chunk's K and V rows are read from, 16 floats at a time: load(j, d) is elements
// d .. d + 15 of key j's row, at(j, d) element d alone. The rows either were converted to f32
// in the item's buffers (KBlocks, F32Rows) or are read from the cache as it holds them
// (F16Rows, BF16Rows, F32Rows), widened in registers; either way the same floats.
//
// A chunk's K rows converted are kept in blocks of 16 elements, the 16 keys' blocks side by
// side, so that the 16 loads of a step of chunk_scores sit at fixed offsets from one pointer
// (with a row stride the compiler spilled the 16 row pointers; rows read in place from one
// cache block are one pointer and a stride).
// k_blocks: [ceil(hd / 16), kKeyChunk, 16]; element d of key j at (d/16)·256 + j·16 + d%16
constexpr int kBlockFloats = kKeyChunk * 16;
struct KBlocks {
  const float* blocks;
  F32x16 load(int j, int d) const { return load16(blocks + d / 16 * kBlockFloats + j * 16); }
};
struct F32Rows {
  const float* rows;
  int64_t stride;  // floats from one key's row to the next
  F32x16 load(int j, int d) const { return load16(rows + j * stride + d); }
  float at(int j, int d) const { return rows[j * stride + d]; }
};
struct F16Rows {
  const uint16_t* rows;
  int64_t stride;
  F32x16 load(int j, int d) const { return load16_f16(rows + j * stride + d); }
  float at(int j, int d) const { return f16_to_f32(rows[j * stride + d]); }
};
struct BF16Rows {
  const uint16_t* rows;
  int64_t stride;
  F32x16 load(int j, int d) const { return load16_bf16(rows + j * stride + d); }
  float at(int j, int d) const { return bf16_to_f32(rows[j * stride + d]); }
};

// The 8-bit dtypes' codes as floats, each row's scale left out (attend_chunk applies it per
// key): int8 and E5M2 as their values, E4M3 as its value · 2⁻⁸ (its bits shifted into a
// half's fields; kv_dequant's trick), the 2⁸ going into the key's scale.
using I8x16 = int8_t __attribute__((vector_size(16)));
using U8x16 = uint8_t __attribute__((vector_size(16)));
template <KvDtype D>
inline F32x16 codes16(const uint8_t* p) {
#if defined(__AVX512F__)
  // GCC scalarizes the vector extensions' byte conversions below.
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (D == KvDtype::Int8) {
    return reinterpret_cast<F32x16>(
        _mm512_maskz_cvtepi32_ps(0xffff, _mm512_maskz_cvtepi8_epi32(0xffff, c)));
  } else {
    const __m256i w = _mm256_cvtepu8_epi16(c);
    __m256i h;
    if constexpr (D == KvDtype::Fp8E5M2) {
      h = _mm256_slli_epi16(w, 8);
    } else {
      h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7f)), 7),
                          _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8));
    }
    return reinterpret_cast<F32x16>(_mm512_maskz_cvtph_ps(0xffff, h));
  }
#endif
  if constexpr (D == KvDtype::Int8) {
    I8x16 c;
    std::memcpy(&c, p, sizeof c);
    return __builtin_convertvector(c, F32x16);
  } else {
    U8x16 c8;
    std::memcpy(&c8, p, sizeof c8);
    const U16x16 c = __builtin_convertvector(c8, U16x16);
    if constexpr (D == KvDtype::Fp8E5M2) {
      return f16x16_to_f32(c << 8);
    } else {
      return f16x16_to_f32(((c & 0x7f) << 7) | ((c & 0x80) << 8));
    }
  }
}
template <KvDtype D>
constexpr float kCodeScale = D == KvDtype::Fp8E4M3 ? 1.0f / 256 : 1.0f;

template <KvDtype D>
struct CodeRows {
  const uint8_t* rows;
  int64_t stride;
  F32x16 load(int j, int d) const { return codes16<D>(rows + j * stride + d); }
  float at(int j, int d) const {
    const uint8_t code = rows[j * stride + d];
    if constexpr (D == KvDtype::Int8) return static_cast<float>(static_cast<int8_t>(code));
    if constexpr (D == KvDtype::Fp8E5M2) return fp8_e5m2_to_f32(code);
    return fp8_e4m3_to_f32(code) * kCodeScale<D>;
  }
};

// The reader of rows as the cache holds them in dtype D, from `rows` (key 0's first element
// of the head), `stride` elements from one key's row to the next.
template <KvDtype D>
auto cache_rows(const std::byte* rows, int64_t stride) {
  if constexpr (D == KvDtype::F16) {
    return F16Rows{reinterpret_cast<const uint16_t*>(rows), stride};
  } else if constexpr (D == KvDtype::BF16) {
    return BF16Rows{reinterpret_cast<const uint16_t*>(rows), stride};
  } else if constexpr (D == KvDtype::F32) {
    return F32Rows{reinterpret_cast<const float*>(rows), stride};
  } else {
    return CodeRows<D>{reinterpret_cast<const uint8_t*>(rows), stride};
  }
}

}  // namespace
}  // namespace tern::cpu
