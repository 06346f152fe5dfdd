#include "tern/backend/rope_config.h"

namespace tern {

cpu::RopeConfig rope_config(const ModelConfig& c, const ModelWeights& w) {
  cpu::RopeConfig r;
  r.head_dim = static_cast<int>(c.head_dim);
  r.rotary_dim = r.head_dim;
  r.theta = c.rope_theta;
  r.layout = w.rope_layout == RopeLayout::Interleaved ? cpu::RopeLayout::Interleaved
                                                      : cpu::RopeLayout::Neox;
  if (!w.rope_freq_factors.empty()) {
    // GGUF llama 3: the divisors replace the scaling parameters, which such files lack.
    r.freq_factors.assign(w.rope_freq_factors.begin(), w.rope_freq_factors.end());
  } else if (c.rope_scaling.type != RopeScalingType::None) {
    const RopeScaling& s = c.rope_scaling;
    r.scaling.type = s.type == RopeScalingType::Linear   ? cpu::RopeScalingType::Linear
                     : s.type == RopeScalingType::Llama3 ? cpu::RopeScalingType::Llama3
                                                         : cpu::RopeScalingType::Yarn;
    r.scaling.factor = s.factor;
    r.scaling.low_freq_factor = s.low_freq_factor;
    r.scaling.high_freq_factor = s.high_freq_factor;
    if (s.original_max_position_embeddings > 0)
      r.scaling.original_max_position_embeddings = s.original_max_position_embeddings;
    r.scaling.beta_fast = s.beta_fast;
    r.scaling.beta_slow = s.beta_slow;
    r.scaling.truncate = s.truncate;
    r.scaling.attention_factor = s.attention_factor;
  }
  return r;
}

cpu::RopeConfig local_rope_config(const ModelConfig& c, const ModelWeights& w) {
  cpu::RopeConfig r = rope_config(c, w);
  if (c.rope_local_theta <= 0) return r;  // no local RoPE: the one every layer uses
  r.theta = c.rope_local_theta;
  r.scaling = {};
  r.freq_factors.clear();
  return r;
}

}  // namespace tern
