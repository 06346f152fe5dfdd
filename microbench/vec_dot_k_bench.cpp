// Q4_K / Q5_K / Q6_K dot kernels per ISA in a GEMV-shaped loop, single-threaded: one Q8_K
// activation row against every row of a weight matrix, as decode does. Reports weight
// bytes/s. Shapes: 4096 × 4096 (weights 9-14 MB, past L2), 16 × 4096 (weights stay in
// L1/L2, so the kernel's own speed shows) and Qwen3-0.6B's (rows of 4, 8, 12 super-blocks).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tern/blocks/block_layouts.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/vec_dot.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace {

using namespace tern;
using namespace tern::cpu;

size_t block_bytes(DType type) {
  return type == DType::Q4_K   ? sizeof(BlockQ4_K)
         : type == DType::Q5_K ? sizeof(BlockQ5_K)
                               : sizeof(BlockQ6_K);
}

// Random quants and scales; finite f16 d / dmin.
std::vector<uint8_t> random_weights(DType type, int64_t rows, int64_t k) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> w(rows * (k / kQKK) * block_bytes(type));
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  const uint16_t d = f32_to_f16(0.01f), dmin = f32_to_f16(0.002f);
  for (size_t off = 0; off < w.size(); off += block_bytes(type)) {
    if (type == DType::Q6_K) {
      std::memcpy(w.data() + off + offsetof(BlockQ6_K, d), &d, 2);
    } else {
      std::memcpy(w.data() + off, &d, 2);
      std::memcpy(w.data() + off + 2, &dmin, 2);
    }
  }
  return w;
}

std::vector<BlockQ8_K> random_activations(int64_t k) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> q(-128, 127);
  std::vector<BlockQ8_K> a(k / kQKK);
  for (auto& b : a) {
    b.d = 0.01f;
    for (auto& v : b.qs) v = static_cast<int8_t>(q(rng));
    for (int g = 0; g < kQKK / 16; ++g) {
      int sum = 0;
      for (int e = 0; e < 16; ++e) sum += b.qs[16 * g + e];
      b.bsums[g] = static_cast<int16_t>(sum);
    }
  }
  return a;
}

void gemv(benchmark::State& state, DType type, VecDotFn fn, int64_t rows, int64_t k) {
  // w: [rows, k] in blocks; a: [k] in Q8_K blocks; y: [rows]
  const auto w = random_weights(type, rows, k);
  const auto a = random_activations(k);
  std::vector<float> y(rows);
  const size_t row_bytes = (k / kQKK) * block_bytes(type);
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) y[r] = fn(k, w.data() + r * row_bytes, a.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * rows *
                          static_cast<int64_t>(row_bytes));
}

VecDotFn kernel(DType type, Isa isa) {
  switch (isa) {
    case Isa::Avx2:
      return avx2_vec_dot_k(type);
    case Isa::Avx512:  // and Amx: both AVX-512 levels share the 16-chain GEMV
      return chains16_vec_dot_k(type);
    case Isa::Amx:
      return nullptr;
    case Isa::Scalar:
      return scalar_vec_dot(type);
  }
  return nullptr;
}

const bool registered = [] {
  const struct {
    const char* name;
    int64_t rows, k;
  } shapes[] = {{"4096x4096", 4096, 4096},
                {"in_cache_16x4096", 16, 4096},
                // Qwen3-0.6B's decode shapes: rows of 4, 8 and 12 super-blocks.
                {"3072x1024", 3072, 1024},
                {"1024x2048", 1024, 2048},
                {"1024x3072", 1024, 3072}};
  const struct {
    DType type;
    const char* name;
  } types[] = {{DType::Q4_K, "Q4_K"}, {DType::Q5_K, "Q5_K"}, {DType::Q6_K, "Q6_K"}};
  for (const auto& shape : shapes) {
    for (const auto& t : types) {
      for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx}) {
        const VecDotFn fn = kernel(t.type, isa);
        if (fn == nullptr || !isa_supported(isa)) continue;
        const std::string name =
            std::string("gemv/") + t.name + "/" + isa_name(isa) + "/" + shape.name;
        benchmark::RegisterBenchmark(name.c_str(), gemv, t.type, fn, shape.rows, shape.k)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  return true;
}();

}  // namespace
