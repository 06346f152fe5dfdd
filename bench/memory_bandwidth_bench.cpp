// The ceiling of decode: how fast this machine reads memory, per thread count. Decoding one
// token reads every weight once, so tokens/s can never exceed (read bandwidth) ÷ (weight bytes
// per token); the decode benchmarks report themselves as a fraction of this figure.
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace {

// 1 GiB: well past any cache (this VM reports a 480 MiB L3), like a model's weights.
constexpr size_t kBytes = size_t{1} << 30;

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

// Sums the buffer as 64-byte vectors, each thread its own contiguous share, the access
// pattern of a GEMV split across threads by rows.
void BM_MemoryRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const auto* p = static_cast<const __m256i*>(buffer().data);
  const size_t n = kBytes / sizeof(__m256i);
  for (auto _ : state) {
    int64_t total = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : total)
    for (int t = 0; t < threads; ++t) {
      const size_t begin = n * static_cast<size_t>(t) / static_cast<size_t>(threads);
      const size_t end = n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
      __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
      for (size_t i = begin; i + 1 < end; i += 2) {
        acc0 = _mm256_add_epi64(acc0, _mm256_load_si256(p + i));
        acc1 = _mm256_add_epi64(acc1, _mm256_load_si256(p + i + 1));
      }
      acc0 = _mm256_add_epi64(acc0, acc1);
      total += _mm256_extract_epi64(acc0, 0) + _mm256_extract_epi64(acc0, 3);
    }
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
}
BENCHMARK(BM_MemoryRead)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
