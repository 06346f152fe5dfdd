// The CPU as a Device: tern::cpu's kernels at the best ISA level this CPU runs (TERN_ISA may
// lower it), weights packed for them at load, activations and KV cache in host memory.
#pragma once

#include "tern/backend/device.h"

namespace tern {

const Device& cpu_device();

}  // namespace tern
