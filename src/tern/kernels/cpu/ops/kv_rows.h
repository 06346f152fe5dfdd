// How attention reads a chunk's K and V rows, 16 floats at a time, from the cache as it holds
// them (f16, bf16, f32, 8-bit codes) or from the f32 copies a work item makes of them; L is the
// level's F32x16 policy (ops/lanes16.h). Only ops/attention_run.h includes it; internal linkage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tern/blocks/kv_dtype.h"
#include "tern/core/half.h"
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
template <class L>
struct F16Rows {
  const uint16_t* rows;
  int64_t stride;
  F32x16 load(int j, int d) const { return L::load16_f16(rows + j * stride + d); }
  float at(int j, int d) const { return f16_to_f32(rows[j * stride + d]); }
};
struct BF16Rows {
  const uint16_t* rows;
  int64_t stride;
  F32x16 load(int j, int d) const { return load16_bf16(rows + j * stride + d); }
  float at(int j, int d) const { return bf16_to_f32(rows[j * stride + d]); }
};

// The 8-bit dtypes' codes as the policy's codes16 gives them: E4M3's are its value · 2⁻⁸, the
// 2⁸ going into the key's scale.
template <KvDtype D>
constexpr float kCodeScale = D == KvDtype::Fp8E4M3 ? 1.0f / 256 : 1.0f;

template <class L, KvDtype D>
struct CodeRows {
  const uint8_t* rows;
  int64_t stride;
  F32x16 load(int j, int d) const { return L::template codes16<D>(rows + j * stride + d); }
  float at(int j, int d) const {
    const uint8_t code = rows[j * stride + d];
    if constexpr (D == KvDtype::Int8) return static_cast<float>(static_cast<int8_t>(code));
    if constexpr (D == KvDtype::Fp8E5M2) return fp8_e5m2_to_f32(code);
    return fp8_e4m3_to_f32(code) * kCodeScale<D>;
  }
};

// The reader of rows as the cache holds them in dtype D, from `rows` (key 0's first element
// of the head), `stride` elements from one key's row to the next.
template <class L, KvDtype D>
auto cache_rows(const std::byte* rows, int64_t stride) {
  if constexpr (D == KvDtype::F16) {
    return F16Rows<L>{reinterpret_cast<const uint16_t*>(rows), stride};
  } else if constexpr (D == KvDtype::BF16) {
    return BF16Rows{reinterpret_cast<const uint16_t*>(rows), stride};
  } else if constexpr (D == KvDtype::F32) {
    return F32Rows{reinterpret_cast<const float*>(rows), stride};
  } else {
    return CodeRows<L, D>{reinterpret_cast<const uint8_t*>(rows), stride};
  }
}

}  // namespace
}  // namespace tern::cpu
