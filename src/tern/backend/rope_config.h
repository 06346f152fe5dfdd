// A model's RoPE as the kernels take it (cpu::RopeConfig: frequencies, scaling, pair layout),
// read from its config and weights. Every backend rotates by the angles cpu::Rope computes on
// the host, so the CPU and a GPU rotate by the same cos/sin table.
#pragma once

#include "tern/formats/model_config.h"
#include "tern/kernels/cpu/ops/rope.h"
#include "tern/weights/model_weights.h"

namespace tern {

cpu::RopeConfig rope_config(const ModelConfig& config, const ModelWeights& weights);
// Gemma 3's sliding layers (ModelConfig::local_rope): rope_local_theta, without the scaling
// (rope_config's when the config has no rope_local_theta).
cpu::RopeConfig local_rope_config(const ModelConfig& config, const ModelWeights& weights);

}  // namespace tern
