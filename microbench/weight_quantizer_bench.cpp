// Weight quantization speed per type, one thread: the row quantizers of kernels/cpu (the fast
// ones, for activations and dummy weights) against the weight quantizers of tern quantize,
// plain, importance-weighted and by GPTQ, on rows of 2048 Gaussian values (items/s = weights
// quantized); and GPTQ's factor of an input's second moments, per column count (its cost grows
// as cols³; every thread).
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "tern/blocks/quantize_row.h"
#include "tern/quant/gptq.h"
#include "tern/quant/weight_quantizer.h"

namespace {

using tern::DType;
constexpr int64_t kK = 2048, kRows = 64;

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Second moments of inputs with 8 shared factors: I + Σ_f a_f a_fᵀ.
std::vector<float> second_moments(int64_t cols) {
  const std::vector<float> a = gaussian(static_cast<size_t>(8 * cols), 3);
  std::vector<float> h(static_cast<size_t>(cols * cols), 0.0f);
  for (int64_t i = 0; i < cols; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      float v = i == j ? 1.0f : 0.0f;
      for (int64_t f = 0; f < 8; ++f)
        v += a[static_cast<size_t>(f * cols + i)] * a[static_cast<size_t>(f * cols + j)];
      h[static_cast<size_t>(i * cols + j)] = v;
    }
  }
  return h;
}

// mode 0: kernels/cpu's row quantizer; 1: weight quantizer, plain; 2: with importances; 3: GPTQ.
void BM_Quantize(benchmark::State& state, DType dtype, int mode) {
  const std::vector<float> x = gaussian(static_cast<size_t>(kK * kRows), 1);
  std::vector<float> importance = gaussian(static_cast<size_t>(kK), 2);
  for (float& v : importance) v = std::exp(2.0f * v);
  const size_t row_bytes = *tern::dtype_bytes(dtype, kK);
  std::vector<uint8_t> y(row_bytes * kRows);
  const tern::quant::GptqFactor factor =
      tern::quant::GptqFactor::of(second_moments(mode == 3 ? kK : 1), mode == 3 ? kK : 1);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) {
      const float* row = x.data() + r * kK;
      uint8_t* out = y.data() + static_cast<size_t>(r) * row_bytes;
      if (mode == 0)
        tern::quantize_row(dtype, row, out, kK);
      else if (mode == 3)
        tern::quant::quantize_row_gptq(dtype, row, out, kK, factor);
      else
        tern::quant::quantize_weight_row(dtype, row, out, kK,
                                         mode == 2 ? importance.data() : nullptr);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * kK * kRows);
}

void register_all() {
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_K,
                  DType::Q5_K, DType::Q6_K}) {
    const std::string name(tern::dtype_name(t));
    benchmark::RegisterBenchmark(("BM_RowQuantizer/" + name).c_str(), BM_Quantize, t, 0);
    benchmark::RegisterBenchmark(("BM_WeightQuantizer/" + name).c_str(), BM_Quantize, t, 1);
    benchmark::RegisterBenchmark(("BM_WeightQuantizer/" + name + "/imatrix").c_str(), BM_Quantize,
                                 t, 2);
    benchmark::RegisterBenchmark(("BM_WeightQuantizer/" + name + "/gptq").c_str(), BM_Quantize, t,
                                 3);
  }
  for (int64_t cols : {1024, 2048, 4096}) {
    benchmark::RegisterBenchmark(("BM_GptqFactor/" + std::to_string(cols)).c_str(),
                                 [cols](benchmark::State& state) {
                                   const std::vector<float> h = second_moments(cols);
                                   for (auto _ : state)
                                     benchmark::DoNotOptimize(tern::quant::GptqFactor::of(h, cols));
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}
const int registered = (register_all(), 0);

}  // namespace
