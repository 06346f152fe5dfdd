// cpu::read_memory: the AVX-512 loop and its scalar twin both give the wrapping sum of every
// 64-bit word, for teams of 1 and 2 and any number of lines; and the bandwidth measurement built
// on it.
#include "tern/kernels/cpu/memory_read.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "tern/plan/memory_bandwidth.h"

namespace tern::cpu {
namespace {

struct Free {
  void operator()(void* p) const { std::free(p); }
};

TEST(MemoryRead, EveryIsaSumsEveryWordForAnyTeamAndLength) {
  // 16 blocks and 7 lines: streams, stolen blocks and lines past the last whole block.
  constexpr size_t kLines = 16 * kReadBlockBytes / 64 + 7;
  std::unique_ptr<void, Free> buf(std::aligned_alloc(64, kLines * 64));
  auto* words = static_cast<uint64_t*>(buf.get());
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < kLines * 8; ++i) words[i] = rng();
  const int team = omp_get_max_threads();
  for (size_t lines : {size_t{1}, size_t{64}, size_t{65}, size_t{64 * 5 + 3}, kLines}) {
    uint64_t expected = 0;
    for (size_t i = 0; i < lines * 8; ++i) expected += words[i];
    // Up to 2 threads: libomp keeps the state of teams larger than the machine's cores for good,
    // which LeakSanitizer reports on the 2-core CI machine.
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      EXPECT_EQ(read_memory(buf.get(), lines * 64, Isa::Scalar), expected)
          << lines << " " << threads;
      if (isa_supported(Isa::Avx512)) {
        EXPECT_EQ(read_memory(buf.get(), lines * 64, Isa::Avx512), expected)
            << lines << " " << threads;
      }
    }
  }
  omp_set_num_threads(team);
}

TEST(MemoryBandwidth, MeasuresAtLeastTwoPassesOfTheBuffer) {
  const plan::BandwidthMeasurement m = plan::measure_read_bandwidth(1, 0.0, 1 << 20);
  EXPECT_GE(m.passes, 2);
  EXPECT_EQ(m.threads, 1);
  EXPECT_EQ(m.buffer_bytes, size_t{1} << 20);
  EXPECT_GT(m.bytes_per_s, 0.0);
}

}  // namespace
}  // namespace tern::cpu
