// The bandwidth measurement: one aligned buffer, timed passes of cpu::read_memory.
#include "tern/plan/memory_bandwidth.h"

#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "tern/core/error.h"
#include "tern/kernels/cpu/memory_read.h"

namespace tern::plan {

BandwidthMeasurement measure_read_bandwidth(int threads, double seconds, size_t buffer_bytes) {
  using Clock = std::chrono::steady_clock;
  buffer_bytes = std::max<size_t>(64, buffer_bytes / 64 * 64);
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> buffer(std::aligned_alloc(64, buffer_bytes));
  if (!buffer)
    throw Error("memory bandwidth: cannot allocate " + std::to_string(buffer_bytes) + " bytes");
  std::memset(buffer.get(), 1, buffer_bytes);  // every page touched, so reads hit real memory

  BandwidthMeasurement m;
  const int team = omp_get_max_threads();
  m.threads = threads > 0 ? threads : team;
  m.buffer_bytes = buffer_bytes;
  omp_set_num_threads(m.threads);  // read_memory's team, as the GEMVs take theirs
  volatile uint64_t sink = 0;      // keeps the sums, so the reads are not optimised away
  const auto start = Clock::now();
  while (m.passes < 2 || std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    const auto pass_start = Clock::now();
    sink = sink + cpu::read_memory(buffer.get(), buffer_bytes);
    const double s = std::chrono::duration<double>(Clock::now() - pass_start).count();
    if (s > 0) m.bytes_per_s = std::max(m.bytes_per_s, static_cast<double>(buffer_bytes) / s);
    ++m.passes;
  }
  omp_set_num_threads(team);
  return m;
}

}  // namespace tern::plan
