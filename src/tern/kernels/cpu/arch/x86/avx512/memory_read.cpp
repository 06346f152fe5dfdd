// read_memory's AVX-512 loop: each stream's next line loaded in turn, the line
// kPrefetchStreamBytes ahead asked for as the packed GEMVs ask for their weights
// (prefetch_stream_ahead).
#include "tern/kernels/cpu/memory_read.h"

#include "tern/kernels/cpu/arch/x86/avx512_intrinsics.h"
#include "tern/kernels/cpu/arch/x86/simd_common.h"

namespace tern::cpu {

uint64_t read_blocks_avx512(const std::byte* const* blocks, int count) {
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                    _mm512_setzero_si512()};
  if (count == 4) {
    for (size_t off = 0; off < kReadBlockBytes; off += 64) {
      for (int s = 0; s < 4; ++s) {
        prefetch_stream_ahead(blocks[s] + off);
        acc[s] = _mm512_add_epi64(acc[s], _mm512_load_si512(blocks[s] + off));
      }
    }
  } else {
    for (int s = 0; s < count; ++s)
      for (size_t off = 0; off < kReadBlockBytes; off += 64) {
        prefetch_stream_ahead(blocks[s] + off);
        acc[s] = _mm512_add_epi64(acc[s], _mm512_load_si512(blocks[s] + off));
      }
  }
  const __m512i all =
      _mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3]));
  return static_cast<uint64_t>(_mm512_reduce_add_epi64(all));
}

}  // namespace tern::cpu
