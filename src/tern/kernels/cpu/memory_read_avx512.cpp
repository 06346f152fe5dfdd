// read_memory's AVX-512 loop: four 64-byte loads an iteration, prefetched 1.5 KiB ahead.
#include "tern/kernels/cpu/avx512_intrinsics.h"
#include "tern/kernels/cpu/memory_read.h"

namespace tern::cpu {

uint64_t read_lines_avx512(const void* lines, size_t begin, size_t end) {
  const auto* p = static_cast<const char*>(lines);
  __m512i acc0 = _mm512_setzero_si512(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  size_t i = begin;
  for (; i + 3 < end; i += 4) {
    const char* line = p + i * 64;
    _mm_prefetch(line + 1536, _MM_HINT_T0);
    _mm_prefetch(line + 1600, _MM_HINT_T0);
    _mm_prefetch(line + 1664, _MM_HINT_T0);
    _mm_prefetch(line + 1728, _MM_HINT_T0);
    acc0 = _mm512_add_epi64(acc0, _mm512_load_si512(line));
    acc1 = _mm512_add_epi64(acc1, _mm512_load_si512(line + 64));
    acc2 = _mm512_add_epi64(acc2, _mm512_load_si512(line + 128));
    acc3 = _mm512_add_epi64(acc3, _mm512_load_si512(line + 192));
  }
  for (; i < end; ++i) acc0 = _mm512_add_epi64(acc0, _mm512_load_si512(p + i * 64));
  acc0 = _mm512_add_epi64(_mm512_add_epi64(acc0, acc1), _mm512_add_epi64(acc2, acc3));
  return static_cast<uint64_t>(_mm512_reduce_add_epi64(acc0));
}

}  // namespace tern::cpu
