// matmul throughput per weight type: GEMV (one token, bandwidth bound) and GEMM (64 tokens as
// in batched decode, or a 512-token prefill; compute bound) on a 2048 x 2048 weight; bytes/s
// counts the weight bytes read once per call, FLOP/s counts 2 N K T. The F16 cases also run the
// shapes of Qwen3-0.6B / 1.7B layers (N x K: attention 1024 x 1024, 0.6B's ffn gate/up
// 3072 x 1024, 1.7B's ffn_down 2048 x 6144) as decode (T = 1) and prefill (T = 512). The
// matmul_in_l2 cases read a 256 x 2048 weight (under 600 KB, so it stays in one core's L2)
// as a GEMV on one thread: the kernel's compute rate, which decode's bandwidth cannot exceed.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tern/blocks/quantize_row.h"
#include "tern/kernels/cpu/matmul.h"

namespace {

using namespace tern;
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
void bm_matmul(benchmark::State& state, DType dtype, int64_t n, int64_t k, int64_t t, int threads,
               bool packed) {
  const size_t row_bytes = *tern::dtype_bytes(dtype, k);
  std::vector<uint8_t> weights(row_bytes * n);
  if (has_quantizer(dtype)) {
    const std::vector<float> w = gaussian(n * k, 1);
    for (int64_t r = 0; r < n; ++r)
      quantize_row(dtype, w.data() + r * k, weights.data() + r * row_bytes, k);
  } else {
    // The IQ3, IQ2 and IQ1 types (tern reads them, never writes them): random blocks under a small
    // f16 d (each block's first 2 bytes; IQ1_M's top byte the high nibbles of bytes 55 and 53),
    // which the kernels' cost does not depend on.
    std::mt19937 rng(1);
    for (uint8_t& b : weights) b = static_cast<uint8_t>(rng());
    const size_t block = static_cast<size_t>(tern::dtype_traits(dtype).block_bytes);
    for (size_t i = 0; i < weights.size(); i += block) {
      if (dtype == DType::IQ1_M) {
        weights[i + 55] = static_cast<uint8_t>((weights[i + 55] & 0x0f) | 0x10);
        weights[i + 53] = static_cast<uint8_t>((weights[i + 53] & 0x0f) | 0xa0);
      } else {
        weights[i + 1] = 0x1a;
      }
    }
  }
  WeightView view = packed_weight_view(dtype, n, k, weights.data());
  std::unique_ptr<std::byte, decltype(&std::free)> packed_copy(nullptr, &std::free);
  if (packed) {
    packed_copy.reset(static_cast<std::byte*>(
        std::aligned_alloc(64, (packed_weight_bytes(view) + 63) / 64 * 64)));
    pack_weights(view, packed_copy.get());
    view.packed = packed_copy.get();
  }
  const std::vector<float> x = gaussian(t * k, 2);
  std::vector<float> y(t * n);
  Workspace ws;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  for (auto _ : state) {
    matmul(view, x.data(), t, y.data(), ws);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  omp_set_num_threads(saved);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(weights.size()));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n * k * t),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

int register_all() {
  for (DType dtype :
       {DType::F32,    DType::F16,    DType::BF16,  DType::Q8_0,    DType::Q4_0,  DType::Q4_1,
        DType::Q5_0,   DType::Q2_K,   DType::Q3_K,  DType::Q4_K,    DType::Q5_K,  DType::Q6_K,
        DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4, DType::IQ3_XXS, DType::IQ3_S, DType::IQ2_XXS,
        DType::IQ2_XS, DType::IQ2_S,  DType::IQ1_S, DType::IQ1_M}) {
    for (int64_t t : {1, 4, 8, 12, 16, 32, 64, 512}) {  // 4-32: batched decode
      for (int threads : {1, 2}) {
        for (bool packed : {false, true}) {
          if (packed && packed_weight_bytes(packed_weight_view(dtype, kN, kK, nullptr)) == 0)
            continue;
          const std::string name = "matmul/" + std::string(tern::dtype_name(dtype)) +
                                   (packed ? "/packed" : "") + "/T:" + std::to_string(t) +
                                   "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), bm_matmul, dtype, kN, kK, t, threads, packed)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1024, 1024}, {3072, 1024}, {2048, 6144}}) {
    for (int64_t t : {1, 512}) {
      for (int threads : {1, 2}) {
        const std::string name = "matmul_shape/F16/" + std::to_string(n) + "x" + std::to_string(k) +
                                 "/T:" + std::to_string(t) + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), bm_matmul, DType::F16, n, k, t, threads, false)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  for (DType dtype :
       {DType::Q8_0, DType::Q4_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,
        DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4, DType::IQ3_XXS, DType::IQ3_S, DType::IQ2_XXS,
        DType::IQ2_XS, DType::IQ2_S, DType::IQ1_S, DType::IQ1_M}) {
    for (bool packed : {false, true}) {
      if (packed && packed_weight_bytes(packed_weight_view(dtype, 256, kK, nullptr)) == 0) continue;
      const std::string name = "matmul_in_l2/" + std::string(tern::dtype_name(dtype)) +
                               (packed ? "/packed" : "") + "/256x2048/T:1/threads:1";
      benchmark::RegisterBenchmark(name.c_str(), bm_matmul, dtype, 256, kK, 1, 1, packed)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return 0;
}
const int registered = register_all();

}  // namespace
