// The Vulkan instance of the process and what it sees: each physical device's name, driver,
// memory heaps, subgroup size and whether it has what tern's kernels use (Vulkan 1.2 or later,
// buffer device addresses, 16-bit storage). `tern devices` prints this; VulkanContext opens one.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tern::vulkan {

// Throws tern::Error "<what>: <VkResult name>" unless `result` is VK_SUCCESS.
void check(VkResult result, const char* what);

struct MemoryHeap {
  uint64_t bytes = 0;
  bool device_local = false;
};

struct PhysicalDeviceInfo {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  std::string name;
  std::string driver;  // driver name and version info, as the driver states them
  std::string type;    // "discrete GPU", "integrated GPU", "CPU", ...
  uint32_t api_version = 0;
  std::vector<MemoryHeap> heaps;
  uint32_t subgroup_size = 0;
  uint32_t max_shared_bytes = 0;
  uint64_t max_storage_buffer_range = 0;
  bool buffer_device_address = false;
  bool storage_16bit = false;
  bool shader_int64 = false;
  bool shader_float16 = false;
  bool shader_int8 = false;
  // What tern needs and this device lacks, "" when it can run tern's kernels.
  std::string missing() const;
};

// The process's instance (made on first use, kept until exit). Throws tern::Error when there
// is no Vulkan loader or driver.
VkInstance instance();
// Every physical device the instance sees, in the loader's order (`vulkan:N` is the Nth).
const std::vector<PhysicalDeviceInfo>& physical_devices();

// "1.3.239"
std::string api_version_name(uint32_t version);

}  // namespace tern::vulkan
