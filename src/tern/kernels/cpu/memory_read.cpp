// read_memory's schedule (the decode GEMVs' read_in_streams) and its scalar loop.
#include "tern/kernels/cpu/memory_read.h"

#include <cstring>
#include <vector>

#include "tern/kernels/cpu/kernel_table.h"
#include "tern/kernels/cpu/stealing_split.h"

namespace tern::cpu {
namespace {

// As the GEMVs (matmul.cpp's kGemvStreams): the hardware prefetcher keeps more lines in flight
// for several streams than for one.
constexpr int kStreams = 4;

uint64_t sum_line(const std::byte* line) {
  uint64_t w[8];
  std::memcpy(w, line, sizeof w);
  return (w[0] + w[4]) + (w[1] + w[5]) + (w[2] + w[6]) + (w[3] + w[7]);
}

}  // namespace

uint64_t read_blocks_scalar(const std::byte* const* blocks, int count) {
  uint64_t total = 0;
  for (size_t off = 0; off < kReadBlockBytes; off += 64)
    for (int s = 0; s < count; ++s) total += sum_line(blocks[s] + off);
  return total;
}

uint64_t read_memory(const void* data, size_t bytes) {
  return read_memory(data, bytes, best_isa());
}

uint64_t read_memory(const void* data, size_t bytes, Isa isa) {
  const ReadBlocksFn read_blocks = op_kernels(isa).read_blocks;
  const auto* base = static_cast<const std::byte*>(data);
  const auto items = static_cast<int64_t>(bytes / kReadBlockBytes);
  // One sum per thread, a cache line apart; added up afterwards (wrapping: any order agrees).
  struct alignas(64) Sum {
    uint64_t value = 0;
  };
  std::vector<Sum> sums(static_cast<size_t>(max_team_threads()));
  read_in_streams<kStreams>(items, [&](const int64_t* at, int count, int member) {
    const std::byte* blocks[kStreams];
    for (int s = 0; s < count; ++s) blocks[s] = base + static_cast<size_t>(at[s]) * kReadBlockBytes;
    sums[static_cast<size_t>(member)].value += read_blocks(blocks, count);
  });
  uint64_t total = 0;
  for (const Sum& s : sums) total += s.value;
  for (size_t off = static_cast<size_t>(items) * kReadBlockBytes; off < bytes; off += 64)
    total += sum_line(base + off);  // the lines past the last whole block
  return total;
}

}  // namespace tern::cpu
