// The Backend ops as Vulkan compute kernels (shaders/), recorded on the device's command
// stream and submitted once per step, when logits() reads the step's rows back.
#pragma once

#include <cstdint>
#include <memory>

#include "tern/backend/backend.h"
#include "tern/backend/vulkan/vulkan_context.h"
#include "tern/formats/model_config.h"
#include "tern/weights/model_weights.h"

namespace tern {

// Uploads `weights` to `context`'s device (vulkan_weights.h); throws tern::Error for a matrix
// type or a model shape the kernels lack, naming it.
std::unique_ptr<Backend> make_vulkan_backend(const Device& device, vulkan::Context& context,
                                             const ModelConfig& config,
                                             const ModelWeights& weights);

}  // namespace tern
