// This machine's memory read bandwidth, measured the way the decode kernels read weights
// (cpu::read_memory), for the plan's decode ceiling when no --bandwidth is given.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::plan {

struct BandwidthMeasurement {
  double bytes_per_s = 0;  // the fastest pass
  int threads = 0;
  size_t buffer_bytes = 0;
  int passes = 0;
};

// 1 GiB: well past any cache (this VM reports a 480 MiB L3), like a model's weights.
inline constexpr size_t kBandwidthBufferBytes = size_t{1} << 30;

// Touches a buffer of `buffer_bytes`, then reads it whole (cpu::read_memory, the decode GEMVs'
// schedule) with `threads` threads (0: OpenMP's default) until `seconds` have passed (at least
// two passes), and keeps the fastest pass: the ceiling is what memory allows, and slower passes
// are other work on the machine. Throws tern::Error when the buffer cannot be allocated.
BandwidthMeasurement measure_read_bandwidth(int threads = 0, double seconds = 1.0,
                                            size_t buffer_bytes = kBandwidthBufferBytes);

}  // namespace tern::plan
