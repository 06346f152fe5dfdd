// matmul throughput per weight type: GEMV (one token, bandwidth bound) and GEMM (64 tokens as
// in batched decode, or a 512-token prefill; compute bound) on a 2048 x 2048 weight; bytes/s
// counts the weight bytes read once per call, FLOP/s counts 2 N K T.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tern/kernels/cpu/matmul.h"
#include "tern/kernels/cpu/quantize.h"

namespace {

using tern::DType;
using namespace tern::cpu;

constexpr int64_t kN = 2048, kK = 2048;

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// packed: the weights rearranged for the best ISA's kernels, as a model's are at load.
void bm_matmul(benchmark::State& state, DType dtype, int64_t t, int threads, bool packed) {
  const size_t row_bytes = *tern::dtype_bytes(dtype, kK);
  std::vector<uint8_t> weights(row_bytes * kN);
  {
    const std::vector<float> w = gaussian(kN * kK, 1);
    for (int64_t r = 0; r < kN; ++r) quantize_row(dtype, w.data() + r * kK, weights.data() + r * row_bytes, kK);
  }
  WeightView view = packed_weight_view(dtype, kN, kK, weights.data());
  std::unique_ptr<std::byte, decltype(&std::free)> packed_copy(nullptr, &std::free);
  if (packed) {
    packed_copy.reset(static_cast<std::byte*>(std::aligned_alloc(64, (packed_weight_bytes(view) + 63) / 64 * 64)));
    pack_weights(view, packed_copy.get());
    view.packed = packed_copy.get();
  }
  const std::vector<float> x = gaussian(t * kK, 2);
  std::vector<float> y(t * kN);
  Workspace ws;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  for (auto _ : state) {
    matmul(view, x.data(), t, y.data(), ws);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  omp_set_num_threads(saved);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(weights.size()));
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(kN * kK * t), benchmark::Counter::kIsIterationInvariantRate);
}

int register_all() {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                      DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (int64_t t : {1, 4, 8, 12, 16, 64, 512}) {  // 4-16: batched decode
      for (int threads : {1, 2}) {
        for (bool packed : {false, true}) {
          if (packed && packed_weight_bytes(packed_weight_view(dtype, kN, kK, nullptr)) == 0) continue;
          const std::string name = "matmul/" + std::string(tern::dtype_name(dtype)) + (packed ? "/packed" : "") +
                                   "/T:" + std::to_string(t) + "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), bm_matmul, dtype, t, threads, packed)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
  return 0;
}
const int registered = register_all();

}  // namespace
