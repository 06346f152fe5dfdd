// Helpers shared by the AVX-512 kernel files (arch/x86/avx512/, amx/) and only them.
// Internal linkage, so each file compiles its own copy with its own flags.
#pragma once

#include <cstdint>
#include <cstring>

#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"

namespace tern::cpu {
namespace {

// Two unaligned 32-byte loads as the low and high halves of one register.
inline __m512i load2x256(const void* lo, const void* hi) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(lo))),
      _mm256_loadu_si256(static_cast<const __m256i*>(hi)), 1);
}

// The f16 at the start of each of 16 blocks `kStride` bytes apart, as 16 floats. Gathers cost
// more here than scalar loads packed four to a register, stored and reloaded as one vector.
template <int kStride>
inline __m512 first_halves16(const void* blocks) {
  const auto* p = static_cast<const uint8_t*>(blocks);
  alignas(32) uint64_t packed[4];
  for (int i = 0; i < 4; ++i) {
    uint64_t v = 0;
    for (int j = 0; j < 4; ++j) {
      uint16_t h;
      std::memcpy(&h, p + (4 * i + j) * kStride, sizeof h);
      v |= uint64_t{h} << (16 * j);
    }
    packed[i] = v;
  }
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(packed)));
}

}  // namespace
}  // namespace tern::cpu
