// Shared by the tests that run on a Vulkan device: whether there is one, and models loaded onto
// it.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "fixtures.h"
#include "tern/core/error.h"
#include "tern/models/model_loader.h"

#ifdef TERN_VULKAN
#include "tern/backend/vulkan/vulkan_instance.h"
#endif

namespace tern::testing {

// Whether this build has the Vulkan backend and the machine a Vulkan device; *why when not.
#ifdef TERN_VULKAN
inline bool have_vulkan_device(std::string* why) {
  try {
    if (!vulkan::physical_devices().empty()) return true;
    *why = "no Vulkan device (Debian: mesa-vulkan-drivers)";
  } catch (const Error& e) {
    *why = e.what();
  }
  return false;
}
#else
inline bool have_vulkan_device(std::string* why) {
  *why = "this build has no Vulkan backend (libvulkan-dev and glslc were not installed)";
  return false;
}
#endif

inline LoadedModel stories260k_on_vulkan() {
  LoadOptions load;
  load.model = fixture("stories260K/stories260K.gguf");
  load.device = "vulkan";
  return load_model(load);
}

}  // namespace tern::testing

// At the top of a test that runs on a Vulkan device: skips without one, and fails under
// TERN_REQUIRE_FIXTURES=1 (CI, where scripts/install-deps.sh installs the Vulkan packages and
// lavapipe).
#define TERN_REQUIRE_VULKAN()                                  \
  do {                                                         \
    std::string why;                                           \
    if (!::tern::testing::have_vulkan_device(&why)) {          \
      if (::tern::testing::fixtures_required()) FAIL() << why; \
      GTEST_SKIP() << why;                                     \
    }                                                          \
  } while (0)
