#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tern/core/half.h"
#include "tern/kernels/cpu/kernel_table.h"
#include "tern/kernels/cpu/ops/row_ops.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cpu {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(Ops, RmsNormMatchesDoubleReference) {
  const int64_t rows = 5, dim = 333;  // odd dim: exercises the loop tails
  auto x = random_vector(rows * dim, 1, 3.0f);
  auto w = random_vector(dim, 2);
  std::vector<float> out(rows * dim);
  const float eps = 1e-6f;
  rms_norm(x.data(), w.data(), rows, dim, eps, out.data());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const double want = x[r * dim + i] * inv * w[i];
      // two float roundings of a product: a few ulp relative
      EXPECT_NEAR(out[r * dim + i], want, 1e-6 * std::abs(want) + 1e-7) << r << "," << i;
    }
  }
  // In place gives the same bits.
  std::vector<float> inplace = x;
  rms_norm(inplace.data(), w.data(), rows, dim, eps, inplace.data());
  EXPECT_EQ(inplace, out);
}

TEST(Ops, RmsNormRowDependsOnlyOnItsRow) {
  const int64_t dim = 1024;
  const int64_t rows = 64;  // big enough to take the parallel path
  auto x = random_vector(rows * dim, 3);
  auto w = random_vector(dim, 4);
  std::vector<float> all(rows * dim), one(dim);
  rms_norm(x.data(), w.data(), rows, dim, 1e-5f, all.data());
  for (int64_t r : {0, 17, 63}) {
    rms_norm(x.data() + r * dim, w.data(), 1, dim, 1e-5f, one.data());
    for (int64_t i = 0; i < dim; ++i) ASSERT_EQ(one[i], all[r * dim + i]) << r << "," << i;
  }
}

TEST(Ops, SiluMul) {
  const int64_t n = 100;
  auto g = random_vector(n, 5, 4.0f);
  auto u = random_vector(n, 6);
  std::vector<float> out(n);
  silu_mul(g.data(), u.data(), out.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double want = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
    EXPECT_NEAR(out[i], want, 1e-6 * std::abs(want) + 1e-7) << i;
  }
  // Fused gate_up rows: [rows, 2 * dim] → [rows, dim], the same values.
  const int64_t rows = 4, dim = 25;
  std::vector<float> gate_up(rows * 2 * dim);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < dim; ++i) {
      gate_up[r * 2 * dim + i] = g[r * dim + i];
      gate_up[r * 2 * dim + dim + i] = u[r * dim + i];
    }
  }
  std::vector<float> fused(rows * dim);
  silu_mul_fused(gate_up.data(), rows, dim, fused.data());
  EXPECT_EQ(fused, out);
}

// Gemma's GeGLU: PyTorch's tanh GELU times up, and the fused [gate | up] rows give the same bits.
TEST(Ops, GeluTanhMul) {
  const int64_t rows = 3, dim = 4099;  // more than one parallel chunk, with a tail
  const int64_t n = rows * dim;
  auto g = random_vector(n, 11, 6.0f);
  auto u = random_vector(n, 12);
  std::vector<float> out(n);
  gelu_tanh_mul(g.data(), u.data(), out.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double x = g[i];
    const double want =
        0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) * u[i];
    EXPECT_NEAR(out[i], want, 1e-6 * std::abs(want) + 1e-7) << i;
  }
  std::vector<float> gate_up(rows * 2 * dim);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(g.begin() + r * dim, dim, gate_up.begin() + r * 2 * dim);
    std::copy_n(u.begin() + r * dim, dim, gate_up.begin() + r * 2 * dim + dim);
  }
  std::vector<float> fused(n);
  gelu_tanh_mul_fused(gate_up.data(), rows, dim, fused.data());
  EXPECT_EQ(fused, out);
}

// Every level's SiLU·up rows this CPU runs give the scalar twin's bits (with a tail, and
// arguments where exp over- and underflows).
TEST(Ops, SiluMulRowsOfEveryLevelMatchScalar) {
  const int64_t n = 4096 + 13;
  auto g = random_vector(n, 9, 30.0f);
  auto u = random_vector(n, 10);
  g[0] = 200.0f, g[1] = -200.0f, g[2] = 0.0f, g[3] = -0.0f;
  std::vector<float> scalar(n);
  silu_mul_row_scalar(g.data(), u.data(), scalar.data(), n);
  for (Isa isa : isa_levels()) {
    if (!isa_supported(isa)) continue;
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> got(n);
    op_kernels(isa).silu_mul_row(g.data(), u.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(f32_to_bits(got[i]), f32_to_bits(scalar[i])) << i;
  }
}

// Each element's bits depend on its own inputs only: not on where it sits in a vector, in the
// row's last partial vector, or in a chunk of a long (threaded) row.
TEST(Ops, SiluMulIsElementwise) {
  const int64_t n = 40000 + 7;
  auto g = random_vector(n, 7, 6.0f);
  auto u = random_vector(n, 8);
  std::vector<float> all(n);
  silu_mul(g.data(), u.data(), all.data(), n);
  for (int64_t begin : {int64_t{0}, int64_t{5}, int64_t{4093}, n - 9}) {
    const int64_t len = std::min<int64_t>(37, n - begin);
    std::vector<float> part(len);
    silu_mul(g.data() + begin, u.data() + begin, part.data(), len);
    for (int64_t i = 0; i < len; ++i) ASSERT_EQ(part[i], all[begin + i]) << begin + i;
  }
}

TEST(Ops, Add) {
  std::vector<float> a{1, 2, 3}, b{0.5f, -2, 10}, out(3);
  add(a.data(), b.data(), out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{1.5f, 0, 13}));
  add(a.data(), b.data(), a.data(), 3);
  EXPECT_EQ(a, out);
}

TEST(Ops, SoftmaxAndLogSoftmax) {
  const int64_t rows = 3, n = 37;
  auto x = random_vector(rows * n, 7, 5.0f);
  x[5] = 1000.0f;  // a large logit must not overflow
  std::vector<float> sm = x, lsm = x;
  softmax(sm.data(), rows, n);
  log_softmax(lsm.data(), rows, n);
  for (int64_t r = 0; r < rows; ++r) {
    double max = -1e300;
    for (int64_t i = 0; i < n; ++i) max = std::max(max, double(x[r * n + i]));
    double z = 0;
    for (int64_t i = 0; i < n; ++i) z += std::exp(x[r * n + i] - max);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(x[r * n + i] - max) / z;
      EXPECT_NEAR(sm[r * n + i], want, 1e-6 * want + 1e-12) << r << "," << i;
      const double want_log = x[r * n + i] - max - std::log(z);
      EXPECT_NEAR(lsm[r * n + i], want_log, 1e-6 * std::abs(want_log) + 1e-5) << r << "," << i;
      total += sm[r * n + i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
  // Everything masked: zeros, not NaN; log stays -inf.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> masked{-inf, -inf, -inf};
  std::vector<float> log_masked = masked;
  softmax(masked.data(), 1, 3);
  log_softmax(log_masked.data(), 1, 3);
  EXPECT_EQ(masked, (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(log_masked, (std::vector<float>{-inf, -inf, -inf}));
}

// Every level's f16 row conversions this CPU runs against the scalar twins, over every f16
// value and many f32 ones (lengths with tails for both vector widths).
TEST(Ops, F16RowConversionsMatchScalar) {
  std::vector<uint16_t> all(0x10000 + 7);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i * 40503u);
  std::vector<float> f(100003);
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = bits_to_f32(static_cast<uint32_t>(i * 2654435761u) & 0xbfffffffu);  // no nan
  }
  std::vector<float> scalar(all.size());
  f16_to_f32_row_scalar(all.data(), scalar.data(), static_cast<int64_t>(all.size()));
  std::vector<uint16_t> h_scalar(f.size());
  f32_to_f16_row_scalar(f.data(), h_scalar.data(), static_cast<int64_t>(f.size()));
  for (Isa isa : isa_levels()) {
    if (!isa_supported(isa)) continue;
    SCOPED_TRACE(isa_name(isa));
    const F16RowKernels kernels = f16_row_kernels(isa);
    std::vector<float> simd(all.size());
    kernels.to_f32(all.data(), simd.data(), static_cast<int64_t>(all.size()));
    for (size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(f32_to_bits(simd[i]), f32_to_bits(scalar[i])) << i;
    }
    std::vector<uint16_t> h_simd(f.size());
    kernels.from_f32(f.data(), h_simd.data(), static_cast<int64_t>(f.size()));
    EXPECT_EQ(h_simd, h_scalar);
  }
  // What the decoder calls is the best level's.
  std::vector<float> best(all.size());
  f16_to_f32_row(all.data(), best.data(), static_cast<int64_t>(all.size()));
  EXPECT_EQ(0, std::memcmp(best.data(), scalar.data(), best.size() * sizeof(float)));
}

TEST(Ops, Bf16RowConversions) {
  std::vector<float> f{1.0f, -2.5f, 3.14159f, 1e-20f};
  std::vector<uint16_t> h(f.size());
  std::vector<float> back(f.size());
  f32_to_bf16_row(f.data(), h.data(), 4);
  bf16_to_f32_row(h.data(), back.data(), 4);
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(h[i], f32_to_bf16(f[i]));
    EXPECT_NEAR(back[i], f[i], std::abs(f[i]) / 128);
  }
}

}  // namespace
}  // namespace tern::cpu
