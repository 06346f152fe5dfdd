// Rotary position embedding: a Rope is built once per model from its config (inverse
// frequencies in double, after any rope scaling) and rotates q and k rows in place by their
// tokens' positions. cos/sin come from the position alone, so a row's result never depends on
// the other tokens of the batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tern::cpu {

// Which dimensions form a rotated pair.
enum class RopeLayout {
  // Pairs (2i, 2i+1): llama.cpp's "NORM" mode, for GGUF llama files (whose converter
  // permuted the rows of q and k so that this layout matches the HF model).
  Interleaved,
  // Pairs (i, i + rotary_dim/2): GPT-NeoX / HF `rotate_half`, for HF llama weights and for
  // GGUF qwen2 / qwen3.
  Neox,
};

enum class RopeScalingType { None, Linear, Llama3, Yarn };

// HF config.json `rope_scaling`.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::None;
  // Linear: positions / factor; Llama3, Yarn: long-wavelength frequencies / factor
  double factor = 1.0;
  // Llama3 only:
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;  // Llama3, Yarn
  // Yarn only: the rotations per original context that bound the ramp between interpolated
  // (below beta_slow) and kept (above beta_fast) frequencies; its dims rounded outwards
  // (truncate); and the factor cos and sin are multiplied by.
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
  double attention_factor = 1.0;
};

struct RopeConfig {
  int head_dim = 0;
  int rotary_dim = 0;      // dimensions rotated (the first ones of each head); 0 means head_dim
  double theta = 10000.0;  // rope_theta / rope_freq_base
  RopeLayout layout = RopeLayout::Neox;
  RopeScaling scaling;
  // Optional per-pair divisors of the frequencies, [rotary_dim / 2]: llama.cpp's
  // `rope_freqs.weight` tensor, which GGUF llama 3.1+ files carry instead of the llama3
  // scaling parameters. Applied after `scaling` (normally that is None when these are given).
  std::vector<float> freq_factors;
};

class Rope {
 public:
  // The largest rotary_dim supported (cos/sin of a token live on the stack).
  static constexpr int kMaxRotaryDim = 1024;

  // Throws tern::Error on an invalid config (odd or out-of-range dims, non-positive theta or
  // factors, freq_factors of the wrong length).
  explicit Rope(const RopeConfig& config);

  // Rotates every head of every token by its position, in place. Dimensions past rotary_dim
  // are left as they are.
  // x: [num_tokens, n_heads, head_dim], token rows `token_stride` floats apart (0 means
  //    n_heads * head_dim; a larger stride lets q and k be rotated inside a fused qkv row);
  // positions: [num_tokens]
  void apply(float* x, int n_heads, std::span<const int32_t> positions,
             int64_t token_stride = 0) const;

  // q and k of the same tokens at once, computing each token's cos/sin a single time.
  // q: [num_tokens, n_q_heads, head_dim], k: [num_tokens, n_k_heads, head_dim] (token rows
  // q_stride / k_stride floats apart, 0 meaning contiguous); positions: [num_tokens]
  void apply_qk(float* q, int n_q_heads, float* k, int n_k_heads,
                std::span<const int32_t> positions, int64_t q_stride = 0,
                int64_t k_stride = 0) const;

  // The same rotation with cos/sin computed beforehand: the positions of a step are the same
  // in every layer, so the runner fills the table once per step and each layer only rotates.
  // Same bits as apply_qk.
  // cos_sin_table: [num_tokens, rotary_dim] (cos of the pairs, then their sin), filled by
  // fill_cos_sin from the positions; positions: [num_tokens]
  void fill_cos_sin(std::span<const int32_t> positions, float* cos_sin_table) const;
  void apply_qk(float* q, int n_q_heads, float* k, int n_k_heads, const float* cos_sin_table,
                int64_t num_tokens, int64_t q_stride = 0, int64_t k_stride = 0) const;

  // The inverse frequency of pair i, after scaling: angle(pos, i) = pos * inv_freq()[i].
  // inv_freq: [rotary_dim / 2]
  std::span<const double> inv_freq() const { return inv_freq_; }

  const RopeConfig& config() const { return config_; }
  int head_dim() const { return config_.head_dim; }
  int rotary_dim() const { return config_.rotary_dim; }

 private:
  // cos_sin: [rotary_dim] = cos of the pairs, then sin of the pairs
  void cos_sin(int32_t position, float* cos_sin) const;
  void rotate_heads(float* x, int n_heads, const float* cos_sin) const;

  RopeConfig config_;
  std::vector<double> inv_freq_;  // [rotary_dim / 2]
  double magnitude_ = 1.0;        // what cos and sin are multiplied by (YaRN's attention factor)
};

// The Llama 3 frequency scaling (HF `_compute_llama3_parameters`): wavelengths shorter than
// original_max / high_freq_factor keep their frequency, longer than original_max /
// low_freq_factor are divided by factor, and the band between interpolates smoothly.
double llama3_scaled_inv_freq(double inv_freq, const RopeScaling& scaling);

// YaRN (HF `_compute_yarn_parameters`, llama.cpp's rope_yarn): the inverse frequencies of
// `rotary_dim` dimensions, each a mix of theta's own (extrapolated) and that divided by factor
// (interpolated), the mix ramping linearly over the pairs between the correction dims of
// beta_fast and beta_slow rotations per original context.
std::vector<double> yarn_inv_freq(double theta, int rotary_dim, const RopeScaling& scaling);

}  // namespace tern::cpu
