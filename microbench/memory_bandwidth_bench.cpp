// The ceiling of decode: how fast this machine reads memory, per thread count. Decoding one
// token reads every weight once, so tokens/s can never exceed (read bandwidth) ÷ (weight bytes
// per token); the decode benchmarks report themselves as a fraction of this figure. The loop
// is cpu::read_memory, the one `tern plan` times for its decode ceiling.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "tern/kernels/cpu/memory_read.h"
#include "tern/plan/memory_bandwidth.h"

namespace {

constexpr size_t kBytes = tern::plan::kBandwidthBufferBytes;

struct AlignedBuffer {
  void* data = nullptr;
  AlignedBuffer() {
    data = std::aligned_alloc(64, kBytes);
    std::memset(data, 1, kBytes);  // touch every page so reads hit real memory
  }
  ~AlignedBuffer() { std::free(data); }
};

AlignedBuffer& buffer() {
  static AlignedBuffer b;
  return b;
}

// The decode GEMVs' access pattern: each thread's share as four streams read in step.
void BM_MemoryRead(benchmark::State& state) {
  const int team = omp_get_max_threads();
  omp_set_num_threads(static_cast<int>(state.range(0)));
  buffer();  // made and touched outside the timed loop: the first run would count the memset
  for (auto _ : state) benchmark::DoNotOptimize(tern::cpu::read_memory(buffer().data, kBytes));
  omp_set_num_threads(team);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
}
BENCHMARK(BM_MemoryRead)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
