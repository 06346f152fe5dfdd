// Helpers shared by the SIMD kernel files (arch/x86/avx2/, avx512/, amx/) and only them:
// it needs AVX2. Internal linkage, so each ISA file compiles its own copy with its own flags.
#pragma once

#include <cpuid.h>
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace tern::cpu {
namespace {

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
// Not tern::f16_to_f32: an inline function from a header, compiled here with ISA flags, may be
// the copy the linker keeps for every other file too.
inline float f16(uint16_t h) { return _cvtsh_ss(h); }

// The sum of the lanes, in one fixed order: halves, then pairs, then the last two.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float hsum(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The hardware prefetcher alone leaves a GEMV streamed from memory short of the bandwidth
// (no prefetch measured ~25% slower for the 32-element types; 4 KiB ahead ~10% slower than
// 1.5 KiB): ask for the weights about 1.5 KiB ahead. Rows of a GEMV are contiguous, so reading
// past a row's end fetches the next row's start; a prefetch never faults.
constexpr std::ptrdiff_t kPrefetchBytes = 1536;

// Prefetches the `bytes` that lie kPrefetchBytes after `p`, a cache line at a time.
inline void prefetch_ahead(const void* p, std::size_t bytes) {
  const char* ahead = static_cast<const char*>(p) + kPrefetchBytes;
  for (std::size_t off = 0; off < bytes; off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
}

// Kernels that read several streams side by side (the GEMV's, matmul.cpp) ask for each one's
// weights this far ahead instead: the packed Q4_0 kernel read 7% slower without it (Intel),
// and with one stream into L1 at kPrefetchBytes 5% slower.
constexpr std::ptrdiff_t kPrefetchStreamBytes = 3072;

// The CPU's vendor is AMD (CPUID leaf 0 says "AuthenticAMD").
inline bool cpu_is_amd() {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  return b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;  // "Auth" "enti" "cAMD"
}
// On AMD the streams are asked for non-temporal (PREFETCHNTA): the weights pass once per token
// and no longer push the rest out of the caches. AMD EPYC Zen 5, 2 threads, `tern bench-model
// -p 512 -n 64`, alternating with PREFETCHT1 in each round: Qwen3-1.7B Q4_K_M decoded
// 1.10-1.21× faster (five rounds), Qwen3-0.6B Q4_0 1.12-1.16× (three), Qwen3-0.6B Q4_K_M
// 0.97-1.10×, prefill the same. Elsewhere (Intel) into L2, as measured there.
inline const bool kPrefetchNonTemporal = cpu_is_amd();

// The cache line kPrefetchStreamBytes after `p`: into L2, or non-temporal (kPrefetchNonTemporal).
inline void prefetch_stream_ahead(const void* p) {
  const char* line = static_cast<const char*>(p) + kPrefetchStreamBytes;
  if (kPrefetchNonTemporal) {
    _mm_prefetch(line, _MM_HINT_NTA);
  } else {
    _mm_prefetch(line, _MM_HINT_T1);
  }
}

// The 12 packed bytes of Q4_K / Q5_K as 8 scales (bytes 0-7) and 8 mins (bytes 8-15), 6 bits
// each. Sub-blocks 0-3 keep scale and min in the low 6 bits of bytes 0-3 and 4-7; sub-blocks
// 4-7 take their low 4 bits from the nibbles of bytes 8-11 and their top 2 bits from the top
// bits of bytes 0-3 (scales) and 4-7 (mins).
inline __m128i unpack_scales_mins(const uint8_t* packed) {
  // 16 bytes: the 12 packed ones and 4 of the quants that follow them in the block.
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  // Output groups of 4: scales 0-3, scales 4-7, mins 0-3, mins 4-7. Their low bits come from
  // bytes 0-3, 8-11 (low nibble), 4-7, 8-11 (high nibble) ...
  const __m128i lo_src =
      _mm_shuffle_epi8(x, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i lo = _mm_blend_epi32(lo_src, _mm_srli_epi16(lo_src, 4), 0b1000);
  // ... and sub-blocks 4-7 take bits 4-5 from the top two bits of bytes 0-3 and 4-7.
  const __m128i hi_src =
      _mm_shuffle_epi8(x, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i lo_mask =
      _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15);
  return _mm_or_si128(_mm_and_si128(lo, lo_mask),
                      _mm_and_si128(_mm_srli_epi16(hi_src, 2), _mm_set1_epi8(0x30)));
}

}  // namespace
}  // namespace tern::cpu
