// Reading memory as fast as this machine can, the way the decode GEMVs read weights: what
// `tern plan` and bench/memory_bandwidth_bench time to find the decode ceiling.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {

// Reads `bytes` bytes at `data` (64-byte aligned, a multiple of 64 bytes) in `threads`
// contiguous shares, one per OpenMP thread (a GEMV's rows split across threads), and returns
// the wrapping sum of its 64-bit words, so the reads cannot be optimised away. The AVX-512 loop
// loads four cache lines an iteration with software prefetch ahead (fewer loads in flight
// would measure the loop, not memory); the scalar twin gives the same sum.
uint64_t read_memory(const void* data, size_t bytes, int threads);
uint64_t read_memory(const void* data, size_t bytes, int threads, Isa isa);

// One thread's share [begin, end) of 64-byte lines.
uint64_t read_lines_scalar(const void* lines, size_t begin, size_t end);
uint64_t read_lines_avx512(const void* lines, size_t begin, size_t end);

}  // namespace tern::cpu
