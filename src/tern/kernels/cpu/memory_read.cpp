// read_memory's split across threads, and its scalar loop.
#include "tern/kernels/cpu/memory_read.h"

#include <omp.h>

#include <cstring>

namespace tern::cpu {

uint64_t read_lines_scalar(const void* lines, size_t begin, size_t end) {
  const auto* p = static_cast<const std::byte*>(lines);
  // Four independent sums keep several loads in flight, as the vector loop does.
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t line = begin; line < end; ++line) {
    uint64_t w[8];
    std::memcpy(w, p + line * 64, sizeof w);
    s0 += w[0] + w[4];
    s1 += w[1] + w[5];
    s2 += w[2] + w[6];
    s3 += w[3] + w[7];
  }
  return s0 + s1 + s2 + s3;
}

uint64_t read_memory(const void* data, size_t bytes, int threads) {
  return read_memory(data, bytes, threads, best_isa());
}

uint64_t read_memory(const void* data, size_t bytes, int threads, Isa isa) {
  const size_t n = bytes / 64;
  const auto read = isa >= Isa::Avx512 ? read_lines_avx512 : read_lines_scalar;
  if (threads < 1) threads = 1;
  uint64_t total = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : total)
  for (int t = 0; t < threads; ++t) {
    const size_t begin = n * static_cast<size_t>(t) / static_cast<size_t>(threads);
    const size_t end = n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
    total += read(data, begin, end);
  }
  return total;
}

}  // namespace tern::cpu
