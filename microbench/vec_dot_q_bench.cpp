// Single-threaded GEMV throughput of the Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 dot kernels per ISA, in
// weight bytes per second: y[r] = vec_dot(w row r, a) over every row of a weight matrix.
//   gemv/<type>/<isa>/4096   4096 x 4096 weights: past L2, the decode shape of a 7B layer
//   gemv/<type>/<isa>/dram   256 MiB of weights: streamed from memory (unless the L3 is larger)
//   cache/<type>/<isa>       the same 8 rows again and again: the kernel's compute ceiling
//   read/<size>              summing the same bytes as uint64: what the memory system gives
// Run with --benchmark_repetitions=5 --benchmark_report_aggregates_only=true for medians.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tern/blocks/block_layouts.h"
#include "tern/core/dtype.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/vec_dot.h"
#include "tern/kernels/cpu/vec_dot_isa.h"

namespace {

using tern::DType;
using namespace tern;
using namespace tern::cpu;

constexpr int64_t kCols = 4096;
constexpr int64_t kDramBytes = int64_t{256} << 20;

// Random blocks with finite, normal f16 scales (denormal floats would time something else).
std::vector<uint8_t> random_blocks(DType type, int64_t nblocks, uint32_t seed) {
  const int block_bytes = tern::dtype_traits(type).block_bytes;
  std::vector<uint8_t> bytes(static_cast<size_t>(nblocks * block_bytes));
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const bool has_second_half = type == DType::Q4_1 || type == DType::Q5_1 || type == DType::Q8_1;
  std::uniform_real_distribution<float> scale(0.001f, 0.01f);
  for (int64_t i = 0; i < nblocks; ++i) {
    uint8_t* blk = bytes.data() + i * block_bytes;
    for (int h = 0; h < (has_second_half ? 2 : 1); ++h) {
      const uint16_t d = tern::f32_to_f16(scale(rng));
      std::memcpy(blk + 2 * h, &d, sizeof d);
    }
  }
  return bytes;
}

DType activation_of(DType weight) {
  return weight == DType::Q4_1 || weight == DType::Q5_1 ? DType::Q8_1 : DType::Q8_0;
}

// y = W a for `rows` rows of kCols, `passes` times over the same rows.
void run_gemv(benchmark::State& state, VecDotFn fn, DType type, int64_t rows, int passes) {
  if (fn == nullptr) {
    state.SkipWithError("no kernel");
    return;
  }
  const int64_t row_bytes = kCols / kQK * tern::dtype_traits(type).block_bytes;
  const std::vector<uint8_t> w = random_blocks(type, rows * kCols / kQK, 1);
  const std::vector<uint8_t> a = random_blocks(activation_of(type), kCols / kQK, 2);
  std::vector<float> y(static_cast<size_t>(rows));
  for (auto _ : state) {
    for (int p = 0; p < passes; ++p) {
      for (int64_t r = 0; r < rows; ++r) y[r] = fn(kCols, w.data() + r * row_bytes, a.data());
      benchmark::DoNotOptimize(y.data());
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * passes * rows * row_bytes);
}

void read_bytes(benchmark::State& state, int64_t bytes) {
  std::vector<uint64_t> buf(static_cast<size_t>(bytes / 8), 1);
  for (auto _ : state) {
    uint64_t sum = 0;
    for (uint64_t v : buf) sum += v;
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

struct IsaGetter {
  const char* name;
  VecDotFn (*get)(DType);
  Isa isa;
};

int register_all() {
  const DType types[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0};
  const IsaGetter isas[] = {{"scalar", scalar_vec_dot, Isa::Scalar},
                            {"avx2", avx2_vec_dot_q, Isa::Avx2},
                            {"avx512", avx512_vec_dot_q, Isa::Avx512},
                            // Q4_0 and Q8_0 on both AVX-512 levels (AVX-512 VNNI only)
                            {"amx", chains16_vec_dot_q, Isa::Avx512}};
  for (DType type : types) {
    const std::string t(tern::dtype_name(type));
    const int64_t row_bytes = kCols / kQK * tern::dtype_traits(type).block_bytes;
    for (const IsaGetter& isa : isas) {
      if (!isa_supported(isa.isa)) continue;
      const VecDotFn fn = isa.get(type);
      if (fn == nullptr) continue;  // "amx": only Q4_0 and Q8_0; "avx512": the others
      benchmark::RegisterBenchmark(("gemv/" + t + "/" + isa.name + "/4096").c_str(), run_gemv, fn,
                                   type, int64_t{4096}, 1)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("gemv/" + t + "/" + isa.name + "/dram").c_str(), run_gemv, fn,
                                   type, kDramBytes / row_bytes, 1)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("cache/" + t + "/" + isa.name).c_str(), run_gemv, fn, type,
                                   int64_t{8}, 64)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::RegisterBenchmark("read/4096x4096xQ4_0", read_bytes, int64_t{4096} * 4096 / kQK * 18)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("read/dram", read_bytes, kDramBytes)->Unit(benchmark::kMillisecond);
  return 0;
}
const int registered = register_all();

}  // namespace
