// The Backend of today's CPU kernels (tern::cpu): each op calls them exactly as the decoder did
// before the seam, in the same order, so outputs are the same bits.
#pragma once

#include <memory>

#include "tern/backend/backend.h"
#include "tern/formats/model_config.h"
#include "tern/weights/model_weights.h"

namespace tern {

// A CPU backend for the decoder of `config` and `weights` (both must outlive it): what
// cpu_device().make_backend makes. Throws tern::Error for invalid rope settings or a matrix type
// without kernels, so a model fails at construction rather than mid-forward.
std::unique_ptr<Backend> make_cpu_backend(const ModelConfig& config, const ModelWeights& weights);

}  // namespace tern
