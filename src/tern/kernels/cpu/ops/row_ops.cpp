// Per-row operators. Loops are written so GCC vectorises them without reassociating float
// math: sums go into a fixed number of partial accumulators that are combined in a fixed
// order, so the vector and scalar forms of a loop compute the same bits.
#include "tern/kernels/cpu/ops/row_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tern/core/half.h"
#include "tern/kernels/cpu/kernel_table.h"
#include "tern/kernels/cpu/ops/silu_row.h"
#include "tern/kernels/cpu/stealing_split.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {
namespace {

// Below this many elements an op runs on the calling thread: waking the team costs more.
constexpr int64_t kParallelMinElems = 1 << 15;

// Element-wise ops share their elements in chunks: a step per element would cost more in
// taking it than in computing it.
constexpr int64_t kChunk = 4096;
int64_t chunks_of(int64_t n) { return (n + kChunk - 1) / kChunk; }

// Sum of squares in double, over 8 lanes combined pairwise at the end.
double sum_squares(const float* x, int64_t n) {
  double lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lane[l] += static_cast<double>(x[i + l]) * x[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) lane[l] += static_cast<double>(x[i]) * x[i];
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

float row_max(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// x[i] = exp(x[i] - max); returns the sum in double, in a fixed lane order.
double exp_shift_sum(float* x, int64_t n, float max) {
  double lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      x[i + l] = std::exp(x[i + l] - max);
      lane[l] += x[i + l];
    }
  }
  for (int l = 0; i < n; ++i, ++l) {
    x[i] = std::exp(x[i] - max);
    lane[l] += x[i];
  }
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

// The level's SiLU·up rows, read once.
SiluMulRowFn silu_mul_row_fn() {
  static const SiluMulRowFn f = op_kernels(best_isa()).silu_mul_row;
  return f;
}

}  // namespace

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
              float* out) {
  parallel_for(
      rows,
      [&](int64_t r) {
        const float* xr = x + r * dim;
        float* yr = out + r * dim;
        const double mean = sum_squares(xr, dim) / static_cast<double>(dim);
        const float inv_rms = static_cast<float>(1.0 / std::sqrt(mean + static_cast<double>(eps)));
        for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv_rms * weight[i];
      },
      rows * dim >= kParallelMinElems);
}

namespace {

void gelu_tanh_mul_row(const float* gate, const float* up, float* out, int64_t n) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  for (int64_t i = 0; i < n; ++i) {
    const double x = gate[i];
    out[i] = static_cast<float>(0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x))) * up[i]);
  }
}

// A gated activation's row function (SiLU's or GELU's, the same signature) over n elements in
// parallel chunks, and over fused [gate | up] rows: each output element is the row function's
// whichever way the rows come.
void gated_chunks(SiluMulRowFn row, const float* gate, const float* up, float* out, int64_t n) {
  // kChunk is a multiple of 16: every chunk but the last is whole vectors.
  parallel_for(
      chunks_of(n),
      [&](int64_t c) {
        const int64_t begin = c * kChunk, len = std::min(kChunk, n - begin);
        row(gate + begin, up + begin, out + begin, len);
      },
      n >= kParallelMinElems);
}

void gated_fused_rows(SiluMulRowFn row, const float* gate_up, int64_t rows, int64_t dim,
                      float* out) {
  parallel_for(
      rows,
      [&](int64_t r) {
        const float* g = gate_up + r * 2 * dim;
        row(g, g + dim, out + r * dim, dim);
      },
      rows * dim >= kParallelMinElems);
}

}  // namespace

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  gated_chunks(silu_mul_row_fn(), gate, up, out, n);
}

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  gated_chunks(gelu_tanh_mul_row, gate, up, out, n);
}

void silu_mul_fused(const float* gate_up, int64_t rows, int64_t dim, float* out) {
  gated_fused_rows(silu_mul_row_fn(), gate_up, rows, dim, out);
}

void gelu_tanh_mul_fused(const float* gate_up, int64_t rows, int64_t dim, float* out) {
  gated_fused_rows(gelu_tanh_mul_row, gate_up, rows, dim, out);
}

void clamped_swiglu(const float* gate, const float* up, float* out, int64_t n, float limit) {
  constexpr float kAlpha = 1.702f;  // gpt-oss's: sigmoid(1.702 x) approximates GELU's Φ(x)
  parallel_for(
      chunks_of(n),
      [&](int64_t c) {
        const int64_t begin = c * kChunk, end = std::min(begin + kChunk, n);
        for (int64_t i = begin; i < end; ++i) {
          const float g = std::min(gate[i], limit);
          const float u = std::clamp(up[i], -limit, limit);
          out[i] = g / (1.0f + std::exp(-kAlpha * g)) * (u + 1.0f);
        }
      },
      n >= kParallelMinElems);
}

void add(const float* a, const float* b, float* out, int64_t n) {
  parallel_for(
      chunks_of(n),
      [&](int64_t c) {
        for (int64_t i = c * kChunk, end = std::min(n, i + kChunk); i < end; ++i)
          out[i] = a[i] + b[i];
      },
      n >= kParallelMinElems);
}

void softmax(float* x, int64_t rows, int64_t n) {
  parallel_for(
      rows,
      [&](int64_t r) {
        float* xr = x + r * n;
        const float max = row_max(xr, n);
        if (max == -std::numeric_limits<float>::infinity()) {
          for (int64_t i = 0; i < n; ++i) xr[i] = 0.0f;
          return;
        }
        const float inv_sum = static_cast<float>(1.0 / exp_shift_sum(xr, n, max));
        for (int64_t i = 0; i < n; ++i) xr[i] *= inv_sum;
      },
      rows * n >= kParallelMinElems);
}

void log_softmax(float* x, int64_t rows, int64_t n) {
  parallel_for(
      rows,
      [&](int64_t r) {
        float* xr = x + r * n;
        const float max = row_max(xr, n);
        if (max == -std::numeric_limits<float>::infinity()) return;
        double lane[8] = {};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
          for (int l = 0; l < 8; ++l) lane[l] += std::exp(xr[i + l] - max);
        }
        for (int l = 0; i < n; ++i, ++l) lane[l] += std::exp(xr[i] - max);
        const double sum = ((lane[0] + lane[4]) + (lane[2] + lane[6])) +
                           ((lane[1] + lane[5]) + (lane[3] + lane[7]));
        const float log_z = max + static_cast<float>(std::log(sum));
        for (int64_t j = 0; j < n; ++j) xr[j] -= log_z;
      },
      rows * n >= kParallelMinElems);
}

void f16_to_f32_row_scalar(const uint16_t* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32_scalar(x[i]);
}

void f32_to_f16_row_scalar(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_f16_scalar(x[i]);
}

void silu_mul_row_scalar(const float* gate, const float* up, float* out, int64_t n) {
  silu_mul_row<ScalarF32x16>(gate, up, out, n);
}

F16RowKernels f16_row_kernels(Isa isa) { return op_kernels(isa).f16_rows; }

void f16_to_f32_row(const uint16_t* x, float* out, int64_t n) {
  static const F16RowKernels kernels = f16_row_kernels(best_isa());
  kernels.to_f32(x, out, n);
}

void f32_to_f16_row(const float* x, uint16_t* out, int64_t n) {
  static const F16RowKernels kernels = f16_row_kernels(best_isa());
  kernels.from_f32(x, out, n);
}

void bf16_to_f32_row(const uint16_t* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(x[i]);
}

void f32_to_bf16_row(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

}  // namespace tern::cpu
