// GptqFactor (a Cholesky factor and a triangular inverse, in double) and the column-by-column
// row quantizer.
#include "tern/quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "tern/core/error.h"
#include "tern/quant/block_code.h"
#include "tern/quant/block_fit.h"

namespace tern::quant {
namespace {

// The factorisations work on tiles of kTile × kTile, so that a tile pair stays in cache while
// it is used kTile times; tiles of a block row or column are done in parallel.
constexpr size_t kTile = 64;

// Σ a_m b_m in 8 partial sums, so that the compiler vectorises it.
double dot(const double* a, const double* b, size_t n) {
  double lane[8] = {};
  size_t m = 0;
  for (; m + 8 <= n; m += 8)
    for (size_t l = 0; l < 8; ++l) lane[l] += a[m + l] * b[m + l];
  double s =
      ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
  for (; m < n; ++m) s += a[m] * b[m];
  return s;
}

// c[i][0..w) −= Σ_{m<depth} a[i][m] · b[m][0..w) for i < rows ≤ kTile, w ≤ kTile (row-major,
// strides lda, ldb, ldc). The tile of c and kTile columns of a at a time are copied out to
// contiguous buffers: in place, their rows lie a row of the matrix apart (a power of two of
// bytes, often) and evict each other from the cache. Four rows of b per pass over c.
void subtract_product(double* c, size_t ldc, const double* a, size_t lda, const double* b,
                      size_t ldb, size_t rows, size_t depth, size_t w) {
  double a_t[kTile * kTile];  // [m][i]
  double acc[kTile * kTile];  // [i][j]
  for (size_t i = 0; i < rows; ++i) std::copy(c + i * ldc, c + i * ldc + w, acc + i * kTile);
  for (size_t m0 = 0; m0 < depth; m0 += kTile) {
    const size_t m1 = std::min(depth, m0 + kTile);
    for (size_t i = 0; i < rows; ++i)
      for (size_t m = m0; m < m1; ++m) a_t[(m - m0) * kTile + i] = a[i * lda + m];
    size_t m = m0;
    for (; m + 4 <= m1; m += 4) {
      const double *b0 = b + m * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
      const double* am = &a_t[(m - m0) * kTile];
      for (size_t i = 0; i < rows; ++i) {
        const double a0 = am[i], a1 = am[kTile + i], a2 = am[2 * kTile + i], a3 = am[3 * kTile + i];
        double* ci = acc + i * kTile;
        for (size_t j = 0; j < w; ++j)
          ci[j] -= (a0 * b0[j] + a1 * b1[j]) + (a2 * b2[j] + a3 * b3[j]);
      }
    }
    for (; m < m1; ++m) {
      const double* bm = b + m * ldb;
      const double* am = &a_t[(m - m0) * kTile];
      for (size_t i = 0; i < rows; ++i) {
        double* ci = acc + i * kTile;
        for (size_t j = 0; j < w; ++j) ci[j] -= am[i] * bm[j];
      }
    }
  }
  for (size_t i = 0; i < rows; ++i) std::copy(acc + i * kTile, acc + i * kTile + w, c + i * ldc);
}

// a [n × n] row-major, symmetric → L (A = L Lᵀ) in its lower triangle (the upper one is
// scratch), by blocks of kTile columns: factor the diagonal tile, solve the panel under it,
// subtract the panel's outer product from the trailing matrix tile by tile. Returns the first
// row whose pivot is not positive, or n.
size_t cholesky_lower(double* a, size_t n) {
  std::vector<double> panel_t;  // the panel transposed: [kTile × n]
  for (size_t k0 = 0; k0 < n; k0 += kTile) {
    const size_t k1 = std::min(n, k0 + kTile), depth = k1 - k0;
    for (size_t i = k0; i < k1; ++i) {
      double* li = &a[i * n];
      for (size_t j = k0; j < i; ++j)
        li[j] = (li[j] - dot(li + k0, &a[j * n + k0], j - k0)) / a[j * n + j];
      const double s = li[i] - dot(li + k0, li + k0, i - k0);
      if (!(s > 0.0) || !std::isfinite(s)) return i;
      li[i] = std::sqrt(s);
    }
#pragma omp parallel for schedule(static)
    for (size_t i = k1; i < n; ++i) {
      double* li = &a[i * n];
      for (size_t j = k0; j < k1; ++j)
        li[j] = (li[j] - dot(li + k0, &a[j * n + k0], j - k0)) / a[j * n + j];
    }
    panel_t.resize(depth * n);
    for (size_t j = k1; j < n; ++j)
      for (size_t m = 0; m < depth; ++m) panel_t[m * n + j] = a[j * n + k0 + m];
    const size_t tiles = (n - k1 + kTile - 1) / kTile;
    // Tile rows of the trailing lower triangle (diagonal tiles whole: their upper part is
    // scratch).
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t ti = 0; ti < tiles; ++ti) {
      const size_t i0 = k1 + ti * kTile, rows = std::min(n, i0 + kTile) - i0;
      for (size_t j0 = k1; j0 < i0 + rows; j0 += kTile)
        subtract_product(&a[i0 * n + j0], n, &a[i0 * n + k0], n, &panel_t[j0], n, rows, depth,
                         std::min(n, j0 + kTile) - j0);
    }
  }
  return n;
}

// x = L⁻¹ for the lower triangular L in l's lower triangle (x [n × n], only its tiles on and
// below the diagonal written). Each block column of x is independent: down its block rows,
// x_rc = L_rr⁻¹ (δ_rc I − Σ_{c≤m<r} L_rm x_mc).
void invert_lower(const double* l, double* x, size_t n) {
  const size_t blocks = (n + kTile - 1) / kTile;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t cb = 0; cb < blocks; ++cb) {
    const size_t c0 = cb * kTile, w = std::min(n, c0 + kTile) - c0;
    std::vector<double> t(kTile * kTile);
    for (size_t r0 = c0; r0 < n; r0 += kTile) {
      const size_t rows = std::min(n, r0 + kTile) - r0;
      std::fill(t.begin(), t.end(), 0.0);
      if (r0 == c0)
        for (size_t i = 0; i < rows; ++i) t[i * kTile + i] = 1.0;
      subtract_product(t.data(), kTile, &l[r0 * n + c0], n, &x[c0 * n + c0], n, rows, r0 - c0, w);
      // Forward substitution inside the diagonal tile L_rr.
      for (size_t i = 0; i < rows; ++i) {
        double* ti = &t[i * kTile];
        const double* li = &l[(r0 + i) * n + r0];
        for (size_t m = 0; m < i; ++m) {
          const double* xm = &x[(r0 + m) * n + c0];
          for (size_t j = 0; j < w; ++j) ti[j] -= li[m] * xm[j];
        }
        double* xi = &x[(r0 + i) * n + c0];
        for (size_t j = 0; j < w; ++j) xi[j] = ti[j] / li[i];
      }
    }
  }
}

}  // namespace

GptqFactor GptqFactor::of(std::span<const float> second_moments, int64_t cols, double damp) {
  if (cols <= 0 || static_cast<int64_t>(second_moments.size()) != cols * cols)
    throw Error("GPTQ: " + std::to_string(second_moments.size()) + " second moments for " +
                std::to_string(cols) + " columns");
  const auto n = static_cast<size_t>(cols);
  // A = P H P (P reverses the column order), damped. With A = L Lᵀ, H = (P L P)(P L P)ᵀ where
  // P L P is upper triangular, so H⁻¹ = Uᵀ U for U = (P L P)⁻¹ = P L⁻¹ P: a Cholesky
  // factorisation and a triangular inverse, and H itself is never inverted.
  // The inverse is written where it is read only (at 11,008 columns each matrix is 970 MB, not
  // zeroed first).
  const std::unique_ptr<double[]> a(new double[n * n]);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) a[i * n + j] = second_moments[(n - 1 - i) * n + (n - 1 - j)];
  double mean_diag = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (!(a[i * n + i] > 0.0)) a[i * n + i] = 1.0;
    mean_diag += a[i * n + i];
  }
  mean_diag /= static_cast<double>(n);
  for (size_t i = 0; i < n; ++i) a[i * n + i] += damp * mean_diag;
  const size_t bad = cholesky_lower(a.get(), n);
  if (bad < n)
    throw Error("GPTQ: the input's second moments are not positive definite (column " +
                std::to_string(n - 1 - bad) + ")");
  const std::unique_ptr<double[]> inv(new double[n * n]);
  invert_lower(a.get(), inv.get(), n);
  GptqFactor f;
  f.cols_ = cols;
  f.u_.assign(n * n, 0.0f);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i; j < n; ++j)
      f.u_[i * n + j] = static_cast<float>(inv[(n - 1 - i) * n + (n - 1 - j)]);
  return f;
}

void quantize_row_gptq(DType dtype, const float* x, void* y, int64_t k, const GptqFactor& factor,
                       AffineRule rule) {
  const BlockFormat format = block_format(dtype);
  if (format.elems == 0)
    throw Error("GPTQ: no block quantizer for type " + std::string(dtype_name(dtype)));
  if (k != factor.cols() || k % format.elems != 0)
    throw Error("GPTQ: a row of " + std::to_string(k) + " for a factor of " +
                std::to_string(factor.cols()) + " columns in blocks of " +
                std::to_string(format.elems));
  const auto block_bytes =
      static_cast<size_t>(*dtype_bytes(dtype, static_cast<uint64_t>(format.elems)));
  std::vector<float> r(x, x + k);
  float w[256], step[256], offset[256];
  BlockCode code;
  for (int64_t s = 0; s < k; s += format.elems) {
    // The scale fit weighs each column by what its error costs once the later columns have
    // absorbed what they can: 1 / [(H restricted to columns j..)⁻¹]_jj = 1 / U_jj².
    for (int e = 0; e < format.elems; ++e) {
      const float u = factor.row(s + e)[s + e];
      w[e] = 1.0f / (u * u);
    }
    fit_block(dtype, r.data() + s, w, &code, rule);
    block_grid(dtype, code, step, offset);
    for (int e = 0; e < format.elems; ++e) {
      const int64_t j = s + e;
      const int q = format.nearest(r[j], step[e], offset[e]);
      code.q[e] = q;
      const float* u = factor.row(j);
      const float err = (r[j] - (step[e] * format.level(q) + offset[e])) / u[j];
      for (int64_t i = j + 1; i < k; ++i) r[i] -= err * u[i];
    }
    pack_block(dtype, code,
               static_cast<uint8_t*>(y) + static_cast<size_t>(s / format.elems) * block_bytes);
  }
}

std::vector<int32_t> act_order(std::span<const float> second_moments, int64_t cols) {
  if (cols <= 0 || static_cast<int64_t>(second_moments.size()) != cols * cols)
    throw Error("act-order: " + std::to_string(second_moments.size()) + " second moments for " +
                std::to_string(cols) + " columns");
  std::vector<int32_t> order(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) order[static_cast<size_t>(j)] = static_cast<int32_t>(j);
  auto diag = [&](int32_t j) { return second_moments[static_cast<size_t>(j) * (cols + 1)]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return diag(a) > diag(b); });
  return order;
}

std::vector<float> permuted_moments(std::span<const float> second_moments,
                                    std::span<const int32_t> order) {
  const size_t n = order.size();
  std::vector<float> out(n * n);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      out[a * n + b] = second_moments[static_cast<size_t>(order[a]) * n + order[b]];
  return out;
}

}  // namespace tern::quant
