#include "tern/backend/vulkan/vulkan_instance.h"

#include <mutex>

#include "tern/core/error.h"

namespace tern::vulkan {
namespace {

const char* result_name(VkResult r) {
  switch (r) {
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_INCOMPLETE:
      return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver)";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default:
      return "VkResult error";
  }
}

std::string device_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU";
    default:
      return "other";
  }
}

PhysicalDeviceInfo describe(VkPhysicalDevice d) {
  PhysicalDeviceInfo info;
  info.handle = d;
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  driver.pNext = &subgroup;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &driver;
  vkGetPhysicalDeviceProperties2(d, &props);
  info.name = props.properties.deviceName;
  info.driver = std::string(driver.driverName) + " (" + driver.driverInfo + ")";
  info.type = device_type_name(props.properties.deviceType);
  info.api_version = props.properties.apiVersion;
  info.subgroup_size = subgroup.subgroupSize;
  info.max_shared_bytes = props.properties.limits.maxComputeSharedMemorySize;
  info.max_storage_buffer_range = props.properties.limits.maxStorageBufferRange;

  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(d, &memory);
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i)
    info.heaps.push_back({memory.memoryHeaps[i].size,
                          (memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0});

  if (info.api_version >= VK_API_VERSION_1_2) {
    VkPhysicalDeviceVulkan12Features f12{};
    f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    VkPhysicalDeviceVulkan11Features f11{};
    f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 features{};
    features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    features.pNext = &f11;
    vkGetPhysicalDeviceFeatures2(d, &features);
    info.buffer_device_address = f12.bufferDeviceAddress;
    info.storage_16bit = f11.storageBuffer16BitAccess;
    info.shader_int64 = features.features.shaderInt64;
    info.shader_float16 = f12.shaderFloat16;
    info.shader_int8 = f12.shaderInt8;
  }
  return info;
}

}  // namespace

void check(VkResult result, const char* what) {
  if (result != VK_SUCCESS)
    throw Error(std::string("vulkan: ") + what + ": " + result_name(result));
}

std::string PhysicalDeviceInfo::missing() const {
  std::string m;
  auto need = [&m](bool has, const char* what) {
    if (!has) m += (m.empty() ? "" : ", ") + std::string(what);
  };
  need(api_version >= VK_API_VERSION_1_2, "Vulkan 1.2");
  need(buffer_device_address, "bufferDeviceAddress");
  need(shader_int64, "shaderInt64");
  return m;
}

VkInstance instance() {
  static std::once_flag once;
  static VkInstance made = VK_NULL_HANDLE;
  static std::string failure;
  std::call_once(once, [] {
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "tern";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo create{};
    create.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    create.pApplicationInfo = &app;
    const VkResult r = vkCreateInstance(&create, nullptr, &made);
    if (r != VK_SUCCESS) {
      made = VK_NULL_HANDLE;
      failure = std::string("vulkan: no instance (") + result_name(r) +
                "); install a Vulkan driver (Debian: mesa-vulkan-drivers)";
    }
  });
  if (made == VK_NULL_HANDLE) throw Error(failure);
  return made;
}

const std::vector<PhysicalDeviceInfo>& physical_devices() {
  static const std::vector<PhysicalDeviceInfo> devices = [] {
    VkInstance inst = instance();
    uint32_t n = 0;
    check(vkEnumeratePhysicalDevices(inst, &n, nullptr), "vkEnumeratePhysicalDevices");
    std::vector<VkPhysicalDevice> handles(n);
    check(vkEnumeratePhysicalDevices(inst, &n, handles.data()), "vkEnumeratePhysicalDevices");
    std::vector<PhysicalDeviceInfo> out;
    for (VkPhysicalDevice d : handles) out.push_back(describe(d));
    return out;
  }();
  return devices;
}

std::string api_version_name(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

}  // namespace tern::vulkan
