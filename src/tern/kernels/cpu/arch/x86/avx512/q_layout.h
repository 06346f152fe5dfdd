// The packed layout of Q4_0 and Q8_0 weights that the 16-chain matmuls read (avx512/q_packed.h),
// made once at load or per call for weights that were not. Internal linkage.
//
// A group holds 16 consecutive rows (the last group padded with zero rows):
//   qs [nb][chunks][16 rows][4 bytes]   chunk c, lane r: bytes 4c..4c+3 of row r's block qs
//   d  [nb][16 rows] f16                the rows' block scales
// so one 64-byte load holds the same 4 bytes of 16 rows — the lanes of one vpdpbusd against
// 4 activation bytes broadcast — and the weights stream from one place, where the file's rows
// would be 16 streams whose scales must be gathered. This is the Amx level's arrangement, which
// its tiles read; the Avx512 level moves each pair of blocks' d before their qs (QLayout in
// avx512/q_packed.h), so that the scales stream with the codes. Q8_0's 8 chunks of a block are,
// as they lie, the B tile AMX multiplies (8 rows of 16 columns × 4 bytes); Q4_0's 4 chunks hold
// elements 4c..4c+3 in their low nibbles and 16 + 4c.. in their high ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tern/blocks/block_layouts.h"
#include "tern/kernels/cpu/arch/x86/avx512/packed_matmul.h"

namespace tern::cpu {
namespace {

constexpr int kRows = kGroupRows;  // and the rows and tokens of an AMX tile

// ---- the layout ------------------------------------------------------------------------------

template <class W>
constexpr int kChunks = static_cast<int>(sizeof(W) - sizeof(uint16_t)) / 4;  // Q4_0: 4, Q8_0: 8
template <class W>
constexpr int64_t kBlockQsBytes = int64_t{kChunks<W>} * 4 * kRows;

template <class W>
size_t group_bytes(int64_t nb) {
  const auto bytes =
      static_cast<size_t>(nb * (kBlockQsBytes<W> + kRows * int64_t{sizeof(uint16_t)}));
  return (bytes + 63) / 64 * 64;  // every group 64-byte aligned
}

// Rows [0, n) of a group from the file's layout; rows n..15 zero.
template <class W>
void pack_group(const std::byte* w_data, size_t w_stride, int n, int64_t nb, std::byte* out) {
  auto* qs = reinterpret_cast<uint32_t*>(out);
  auto* d = reinterpret_cast<uint16_t*>(out + nb * kBlockQsBytes<W>);
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < kRows; ++r) {
      const W* w = r < n ? reinterpret_cast<const W*>(w_data + r * w_stride) + b : nullptr;
      for (int c = 0; c < kChunks<W>; ++c) {
        uint32_t bytes = 0;
        if (w != nullptr) std::memcpy(&bytes, reinterpret_cast<const uint8_t*>(w->qs) + 4 * c, 4);
        qs[(b * kChunks<W> + c) * kRows + r] = bytes;
      }
      d[b * kRows + r] = w != nullptr ? w->d : uint16_t{0};
    }
  }
}

}  // namespace
}  // namespace tern::cpu
