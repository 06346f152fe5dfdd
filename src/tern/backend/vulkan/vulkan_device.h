// Vulkan devices as Devices: `--device vulkan` (the first the loader lists) or `vulkan:N`.
// Weights are uploaded when a backend is made, the KV cache and activations live in device
// memory, and each engine step is one command buffer.
#pragma once

#include <string>
#include <string_view>

#include "tern/backend/device.h"

namespace tern {

// The Vulkan device `name` names ("vulkan", "vulkan:N"), opened on first use; nullptr for a name
// that is not a Vulkan one. Throws tern::Error for an index past the devices there are or a
// device that lacks what the kernels need.
const Device* find_vulkan_device(std::string_view name);

// One paragraph per Vulkan device the loader sees (name, driver, type, memory heaps, subgroup
// size, the features tern uses), for `tern devices`; a line saying why when there are none.
std::string describe_vulkan_devices();

}  // namespace tern
