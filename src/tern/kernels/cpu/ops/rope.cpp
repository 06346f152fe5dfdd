// Rotary embedding. Angles and their cos/sin are computed in double per (position, pair) and
// rounded once to float; no table indexed by batch row exists, so the result for a position is
// the same whatever else is in the batch.
#include "tern/kernels/cpu/ops/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "tern/core/error.h"
#include "tern/kernels/cpu/stealing_split.h"

namespace tern::cpu {
namespace {

std::string rope_where(const RopeConfig& c) {
  return "rope (head_dim " + std::to_string(c.head_dim) + ", rotary_dim " +
         std::to_string(c.rotary_dim) + ")";
}

// One rotation, written once so both layouts do the very same arithmetic.
inline void rotate_pair(float& a, float& b, float c, float s) {
  const float x0 = a;
  const float x1 = b;
  a = x0 * c - x1 * s;
  b = x0 * s + x1 * c;
}

}  // namespace

double llama3_scaled_inv_freq(double inv_freq, const RopeScaling& s) {
  const double original = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = original / s.low_freq_factor;
  const double high_freq_wavelen = original / s.high_freq_factor;
  const double wavelen = 2.0 * std::numbers::pi / inv_freq;
  if (wavelen < high_freq_wavelen) return inv_freq;
  if (wavelen > low_freq_wavelen) return inv_freq / s.factor;
  // Here high_freq_wavelen <= wavelen <= low_freq_wavelen; with equal factors the band is a
  // single wavelength and the interpolation weight is taken as 0 (as vLLM does).
  const double smooth =
      s.high_freq_factor != s.low_freq_factor
          ? (original / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
          : 0.0;
  return (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

std::vector<double> yarn_inv_freq(double theta, int rotary_dim, const RopeScaling& s) {
  const double dim = rotary_dim;
  const double original = static_cast<double>(s.original_max_position_embeddings);
  // The pair index whose wavelength turns `rotations` times over the original context.
  auto correction_dim = [&](double rotations) {
    return dim * std::log(original / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;  // a ramp of one step
  const int pairs = rotary_dim / 2;
  std::vector<double> inv_freq(static_cast<size_t>(pairs));
  for (int i = 0; i < pairs; ++i) {
    const double extrapolated = std::pow(theta, -2.0 * i / dim);
    const double interpolated = extrapolated / s.factor;
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double keep = 1.0 - ramp;  // of the extrapolated frequency
    inv_freq[static_cast<size_t>(i)] = interpolated * (1.0 - keep) + extrapolated * keep;
  }
  return inv_freq;
}

Rope::Rope(const RopeConfig& config) : config_(config) {
  if (config_.rotary_dim == 0) config_.rotary_dim = config_.head_dim;
  const RopeConfig& c = config_;
  if (c.head_dim <= 0 || c.rotary_dim <= 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0 ||
      c.rotary_dim > kMaxRotaryDim) {
    throw Error(rope_where(c) +
                ": rotary_dim must be even, positive, at most head_dim and at most " +
                std::to_string(kMaxRotaryDim));
  }
  if (!(c.theta > 0.0)) throw Error(rope_where(c) + ": rope_theta must be positive");
  const RopeScaling& s = c.scaling;
  if (s.type != RopeScalingType::None && !(s.factor > 0.0)) {
    throw Error(rope_where(c) + ": rope_scaling factor must be positive");
  }
  if (s.type == RopeScalingType::Llama3 &&
      (!(s.low_freq_factor > 0.0) || !(s.high_freq_factor >= s.low_freq_factor) ||
       s.original_max_position_embeddings <= 0)) {
    throw Error(rope_where(c) +
                ": llama3 rope_scaling needs 0 < low_freq_factor <= high_freq_factor and "
                "original_max_position_embeddings > 0");
  }
  const int pairs = c.rotary_dim / 2;
  if (!c.freq_factors.empty() && static_cast<int>(c.freq_factors.size()) != pairs) {
    throw Error(rope_where(c) + ": rope_freqs has " + std::to_string(c.freq_factors.size()) +
                " values, expected " + std::to_string(pairs));
  }
  if (s.type == RopeScalingType::Yarn &&
      (s.original_max_position_embeddings <= 0 || !(s.beta_fast > 0.0) || !(s.beta_slow > 0.0) ||
       !(s.attention_factor > 0.0) || !std::isfinite(s.attention_factor))) {
    throw Error(rope_where(c) +
                ": yarn rope_scaling needs positive beta_fast, beta_slow, attention_factor and "
                "original_max_position_embeddings");
  }
  const std::vector<double> yarn = s.type == RopeScalingType::Yarn
                                       ? yarn_inv_freq(c.theta, c.rotary_dim, s)
                                       : std::vector<double>();
  magnitude_ = s.type == RopeScalingType::Yarn ? s.attention_factor : 1.0;
  inv_freq_.resize(pairs);
  for (int i = 0; i < pairs; ++i) {
    // theta^(-2i / rotary_dim), as HF and llama.cpp (n_dims = rotary dims) define it.
    double f = std::pow(c.theta, -2.0 * i / c.rotary_dim);
    if (s.type == RopeScalingType::Linear) f /= s.factor;
    if (s.type == RopeScalingType::Llama3) f = llama3_scaled_inv_freq(f, s);
    if (s.type == RopeScalingType::Yarn) f = yarn[static_cast<size_t>(i)];
    if (!c.freq_factors.empty()) {
      if (!(c.freq_factors[i] > 0.0f)) {
        throw Error(rope_where(c) + ": rope_freqs[" + std::to_string(i) + "] is not positive");
      }
      f /= c.freq_factors[i];
    }
    inv_freq_[i] = f;
  }
}

void Rope::cos_sin(int32_t position, float* cs) const {
  const int pairs = config_.rotary_dim / 2;
  for (int i = 0; i < pairs; ++i) {
    const double angle = static_cast<double>(position) * inv_freq_[i];
    cs[i] = static_cast<float>(magnitude_ * std::cos(angle));
    cs[pairs + i] = static_cast<float>(magnitude_ * std::sin(angle));
  }
}

void Rope::rotate_heads(float* x, int n_heads, const float* cs) const {
  const int pairs = config_.rotary_dim / 2;
  const int head_dim = config_.head_dim;
  const float* cos = cs;
  const float* sin = cs + pairs;
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    if (config_.layout == RopeLayout::Interleaved) {
      for (int i = 0; i < pairs; ++i) rotate_pair(xh[2 * i], xh[2 * i + 1], cos[i], sin[i]);
    } else {
      for (int i = 0; i < pairs; ++i) rotate_pair(xh[i], xh[pairs + i], cos[i], sin[i]);
    }
  }
}

void Rope::apply(float* x, int n_heads, std::span<const int32_t> positions,
                 int64_t token_stride) const {
  if (token_stride == 0) token_stride = static_cast<int64_t>(n_heads) * config_.head_dim;
  const int64_t num_tokens = static_cast<int64_t>(positions.size());
  parallel_for(
      num_tokens,
      [&](int64_t t) {
        float cs[kMaxRotaryDim];
        cos_sin(positions[t], cs);
        rotate_heads(x + t * token_stride, n_heads, cs);
      },
      num_tokens >= 8);
}

void Rope::apply_qk(float* q, int n_q_heads, float* k, int n_k_heads,
                    std::span<const int32_t> positions, int64_t q_stride, int64_t k_stride) const {
  if (q_stride == 0) q_stride = static_cast<int64_t>(n_q_heads) * config_.head_dim;
  if (k_stride == 0) k_stride = static_cast<int64_t>(n_k_heads) * config_.head_dim;
  const int64_t num_tokens = static_cast<int64_t>(positions.size());
  parallel_for(
      num_tokens,
      [&](int64_t t) {
        float cs[kMaxRotaryDim];
        cos_sin(positions[t], cs);
        rotate_heads(q + t * q_stride, n_q_heads, cs);
        rotate_heads(k + t * k_stride, n_k_heads, cs);
      },
      num_tokens >= 8);
}

void Rope::fill_cos_sin(std::span<const int32_t> positions, float* table) const {
  const int64_t num_tokens = static_cast<int64_t>(positions.size());
  parallel_for(
      num_tokens, [&](int64_t t) { cos_sin(positions[t], table + t * config_.rotary_dim); },
      num_tokens >= 8);
}

void Rope::apply_qk(float* q, int n_q_heads, float* k, int n_k_heads, const float* table,
                    int64_t num_tokens, int64_t q_stride, int64_t k_stride) const {
  if (q_stride == 0) q_stride = static_cast<int64_t>(n_q_heads) * config_.head_dim;
  if (k_stride == 0) k_stride = static_cast<int64_t>(n_k_heads) * config_.head_dim;
  parallel_for(
      num_tokens,
      [&](int64_t t) {
        const float* cs = table + t * config_.rotary_dim;
        rotate_heads(q + t * q_stride, n_q_heads, cs);
        rotate_heads(k + t * k_stride, n_k_heads, cs);
      },
      num_tokens >= 8);
}

}  // namespace tern::cpu
