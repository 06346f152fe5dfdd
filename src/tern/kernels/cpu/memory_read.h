// Reading memory as fast as this machine can, the way the decode GEMVs read weights: what
// `tern plan` and microbench/memory_bandwidth_bench time to find the decode ceiling.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {

// Bytes of one item of the schedule: about one weight row of a 1-2B model's matrices.
inline constexpr size_t kReadBlockBytes = 4096;

// Reads `bytes` bytes at `data` (64-byte aligned, a multiple of 64 bytes) with the decode GEMVs'
// schedule (read_in_streams: the thread team, each member its share as four streams read in step,
// prefetched as the GEMVs prefetch, stealing from the slowest at the end) and returns the wrapping
// sum of its 64-bit words, so the reads cannot be optimised away. With the best ISA's loop, or
// `isa`'s: the AVX-512 one and its scalar twin give the same sum.
uint64_t read_memory(const void* data, size_t bytes);
uint64_t read_memory(const void* data, size_t bytes, Isa isa);

// `count` blocks of kReadBlockBytes read side by side, line by line (count ≤ 4); the level's
// loop comes from the dispatch table (op_kernels).
using ReadBlocksFn = uint64_t (*)(const std::byte* const* blocks, int count);
uint64_t read_blocks_scalar(const std::byte* const* blocks, int count);
uint64_t read_blocks_avx512(const std::byte* const* blocks, int count);

}  // namespace tern::cpu
