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

// Sums the buffer, each thread its own contiguous share (the access pattern of a GEMV split
// across threads by rows), four cache lines per iteration with software prefetch ahead, as
// the decode kernels read weights: fewer loads in flight would measure the probe, not memory.
void BM_MemoryRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  struct alignas(64) Line {
    int64_t words[8];
  };
  const auto* p = static_cast<const Line*>(buffer().data);
  const size_t n = kBytes / sizeof(Line);
  for (auto _ : state) {
    int64_t total = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : total)
    for (int t = 0; t < threads; ++t) {
      const size_t begin = n * static_cast<size_t>(t) / static_cast<size_t>(threads);
      const size_t end = n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
#if defined(__AVX512F__)
      __m512i acc0 = _mm512_setzero_si512(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
      for (size_t i = begin; i + 3 < end; i += 4) {
        _mm_prefetch(reinterpret_cast<const char*>(p + i) + 1536, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + i) + 1600, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + i) + 1664, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + i) + 1728, _MM_HINT_T0);
        acc0 = _mm512_add_epi64(acc0, _mm512_load_si512(p + i));
        acc1 = _mm512_add_epi64(acc1, _mm512_load_si512(p + i + 1));
        acc2 = _mm512_add_epi64(acc2, _mm512_load_si512(p + i + 2));
        acc3 = _mm512_add_epi64(acc3, _mm512_load_si512(p + i + 3));
      }
      acc0 = _mm512_add_epi64(_mm512_add_epi64(acc0, acc1), _mm512_add_epi64(acc2, acc3));
      alignas(64) int64_t lanes[8];
      _mm512_store_si512(lanes, acc0);
      for (int64_t lane : lanes) total += lane;
#else
      // Without AVX-512 (TERN_NATIVE=OFF or an older CPU): the same pattern, 8-byte loads.
      const auto* q = reinterpret_cast<const int64_t*>(p + begin);
      const size_t words = (end - begin) * (sizeof(*p) / sizeof(int64_t));
      int64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (size_t i = 0; i + 3 < words; i += 4) {
        s0 += q[i];
        s1 += q[i + 1];
        s2 += q[i + 2];
        s3 += q[i + 3];
      }
      total += s0 + s1 + s2 + s3;
#endif
    }
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
}
BENCHMARK(BM_MemoryRead)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
