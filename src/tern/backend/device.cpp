// The devices this build has. Each backend folder contributes its own; this list is the only
// place above the folders that names them.
#include "tern/backend/device.h"

#include <thread>

#include "tern/backend/cpu/cpu_device.h"
#include "tern/core/error.h"
#include "tern/kernels/cpu/vec_dot.h"
#ifdef TERN_VULKAN
#include "tern/backend/vulkan/vulkan_device.h"
#endif

namespace tern {

const Device& find_device(std::string_view name) {
  if (name.empty() || name == cpu_device().name()) return cpu_device();
#ifdef TERN_VULKAN
  if (const Device* d = find_vulkan_device(name)) return *d;
#endif
  throw Error("--device " + std::string(name) + ": this build has no such device (" +
              device_names() + ")");
}

std::string device_names() {
#ifdef TERN_VULKAN
  return "cpu, vulkan[:N]";
#else
  return "cpu";
#endif
}

std::string describe_devices() {
  std::string out = "cpu  " + std::to_string(std::thread::hardware_concurrency()) +
                    " hardware threads, instruction set " + cpu::isa_name(cpu::best_isa()) + "\n";
#ifdef TERN_VULKAN
  out += describe_vulkan_devices();
#else
  out += "vulkan: not in this build (it needs libvulkan-dev and glslc when built)\n";
#endif
  return out;
}

}  // namespace tern
