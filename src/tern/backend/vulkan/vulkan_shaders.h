// The SPIR-V of the Vulkan kernels (shaders/*.comp), compiled by glslc at build time and
// embedded by cmake/vulkan_shaders.cmake, which generates the definition.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace tern::vulkan {

// The words of kernel `name` ("matmul_q4_0", "attention", ...); throws tern::Error for a name
// this build lacks.
std::span<const uint32_t> shader_spirv(std::string_view name);

}  // namespace tern::vulkan
