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
    r.scaling.type = c.rope_scaling.type == RopeScalingType::Linear ? cpu::RopeScalingType::Linear
                                                                    : cpu::RopeScalingType::Llama3;
    r.scaling.factor = c.rope_scaling.factor;
    r.scaling.low_freq_factor = c.rope_scaling.low_freq_factor;
    r.scaling.high_freq_factor = c.rope_scaling.high_freq_factor;
    if (c.rope_scaling.original_max_position_embeddings > 0)
      r.scaling.original_max_position_embeddings = c.rope_scaling.original_max_position_embeddings;
  }
  return r;
}

}  // namespace tern
