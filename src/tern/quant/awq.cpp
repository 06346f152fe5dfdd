// AWQ's scale search (awq.h).
#include "tern/quant/awq.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tern/core/error.h"
#include "tern/quant/weight_quantizer.h"

namespace tern::quant {
namespace {

constexpr int kGrid = 20;            // α = 0, 1/20, …, 19/20 (AutoAWQ's n_grid)
constexpr int64_t kSampleRows = 96;  // rows of each reader the candidates are scored on
// Scales beyond this factor either way are clamped: the producer's outputs are divided by s and
// stored as f16, and an input never activated says nothing that would justify more.
constexpr float kMaxScale = 64.0f;

// Evenly spaced rows of m, at most kSampleRows.
std::vector<int64_t> sample_rows(int64_t rows) {
  const int64_t n = std::min(rows, kSampleRows);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = i * rows / n;
  return out;
}

// w̄_j: the mean over the sampled rows of |w_ij| / max|w| over w_ij's group.
std::vector<float> mean_relative_weight(const AwqScalingPoint& p, int group) {
  const int64_t cols = p.readers.front().cols;
  std::vector<double> sum(static_cast<size_t>(cols), 0.0);
  int64_t rows = 0;
  for (const FloatMatrix& m : p.readers)
    for (int64_t r : sample_rows(m.rows)) {
      const float* w = m.row(r);
      for (int64_t g = 0; g < cols; g += group) {
        float peak = 0.0f;
        for (int64_t j = g; j < g + group; ++j) peak = std::max(peak, std::abs(w[j]));
        if (peak > 0.0f)
          for (int64_t j = g; j < g + group; ++j)
            sum[static_cast<size_t>(j)] += std::abs(w[j]) / peak;
      }
      ++rows;
    }
  std::vector<float> mean(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j)
    mean[static_cast<size_t>(j)] =
        static_cast<float>(sum[static_cast<size_t>(j)] / static_cast<double>(rows));
  return mean;
}

// Σ over the sampled rows of Σ_j I_j (w_ij − ŵ_ij / s_j)², the readers' columns scaled by s
// and quantized with importances I_j / s_j² (those of the scaled input x / s).
double scaled_error(const AwqScalingPoint& p, std::span<const float> s, DType dtype,
                    AffineRule rule) {
  const int64_t cols = p.readers.front().cols;
  std::vector<float> scaled_importance(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j)
    scaled_importance[static_cast<size_t>(j)] =
        p.importance[static_cast<size_t>(j)] /
        (s[static_cast<size_t>(j)] * s[static_cast<size_t>(j)]);
  std::vector<std::pair<const FloatMatrix*, int64_t>> rows;
  for (const FloatMatrix& m : p.readers)
    for (int64_t r : sample_rows(m.rows)) rows.emplace_back(&m, r);
  const auto row_bytes = static_cast<size_t>(*dtype_bytes(dtype, static_cast<uint64_t>(cols)));
  double error = 0.0;
#pragma omp parallel reduction(+ : error)
  {
    std::vector<float> x(static_cast<size_t>(cols));
    std::vector<std::byte> q(row_bytes);
#pragma omp for schedule(dynamic, 4)
    for (size_t i = 0; i < rows.size(); ++i) {
      const float* w = rows[i].first->row(rows[i].second);
      for (int64_t j = 0; j < cols; ++j)
        x[static_cast<size_t>(j)] = w[j] * s[static_cast<size_t>(j)];
      quantize_weight_row(dtype, x.data(), q.data(), cols, scaled_importance.data(), rule);
      // (w − ŵ/s)² I = (w s − ŵ)² I / s²: the error of the scaled row under the scaled importance.
      error += weighted_error(dtype, x.data(), q.data(), cols, scaled_importance.data());
    }
  }
  return error;
}

}  // namespace

std::vector<float> search_awq_scales(const AwqScalingPoint& p, DType dtype, AffineRule rule) {
  if (p.readers.empty()) throw Error("AWQ: a scaling point without matrices");
  const int64_t cols = p.readers.front().cols;
  for (const FloatMatrix& m : p.readers)
    if (m.cols != cols) throw Error("AWQ: matrices of one input differ in width");
  if (static_cast<int64_t>(p.importance.size()) != cols)
    throw Error("AWQ: " + std::to_string(p.importance.size()) + " importances for " +
                std::to_string(cols) + " inputs");
  const int group = block_format(dtype).elems;
  // x̄: the inputs' RMS; an input never activated gets the mean of the others (no evidence
  // either way, so no scaling of its own).
  std::vector<float> x_rms(static_cast<size_t>(cols));
  double sum = 0.0;
  int64_t seen = 0;
  for (int64_t j = 0; j < cols; ++j)
    if (p.importance[static_cast<size_t>(j)] > 0.0f) {
      sum += std::sqrt(p.importance[static_cast<size_t>(j)]);
      ++seen;
    }
  const float fill = seen > 0 ? static_cast<float>(sum / static_cast<double>(seen)) : 1.0f;
  for (int64_t j = 0; j < cols; ++j) {
    const float i = p.importance[static_cast<size_t>(j)];
    x_rms[static_cast<size_t>(j)] = i > 0.0f ? std::sqrt(i) : fill;
  }
  const std::vector<float> w_mean = mean_relative_weight(p, group);

  std::vector<float> best(static_cast<size_t>(cols), 1.0f);
  double best_error = scaled_error(p, best, dtype, rule);
  std::vector<float> s(static_cast<size_t>(cols));
  for (int g = 0; g < kGrid; ++g) {
    const double alpha = static_cast<double>(g) / kGrid;
    float lo = INFINITY, hi = 0.0f;
    for (int64_t j = 0; j < cols; ++j) {
      const auto k = static_cast<size_t>(j);
      const double v = std::pow(x_rms[k], alpha) / (std::pow(w_mean[k], 1.0 - alpha) + 1e-4);
      s[k] = std::max(static_cast<float>(v), 1e-4f);
      lo = std::min(lo, s[k]);
      hi = std::max(hi, s[k]);
    }
    const float norm = std::sqrt(lo * hi);
    for (float& v : s) v = std::clamp(v / norm, 1.0f / kMaxScale, kMaxScale);
    const double error = scaled_error(p, s, dtype, rule);
    if (error < best_error) {
      best_error = error;
      best = s;
    }
  }
  return best;
}

void apply_awq_scales(const AwqScalingPoint& p, std::span<const float> s) {
  for (size_t j = 0; j < p.producer_weight.size(); ++j) p.producer_weight[j] /= s[j];
  for (int64_t r = 0; r < p.producer_rows.rows; ++r) {
    float* w = p.producer_rows.row(r);
    for (int64_t j = 0; j < p.producer_rows.cols; ++j) w[j] /= s[static_cast<size_t>(r)];
  }
  for (size_t j = 0; j < p.producer_bias.size(); ++j) p.producer_bias[j] /= s[j];
  for (const FloatMatrix& m : p.readers)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m.rows; ++r) {
      float* w = m.row(r);
      for (int64_t j = 0; j < m.cols; ++j) w[j] *= s[static_cast<size_t>(j)];
    }
}

}  // namespace tern::quant
