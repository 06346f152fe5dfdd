// Where the shared test fixtures are: $TERN_FIXTURES, else ../shared/fixtures beside the
// checkout. Without them a test skips with a message, unless TERN_REQUIRE_FIXTURES=1 (CI),
// where it fails.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tern::testing {

inline std::filesystem::path fixtures_dir() {
  if (const char* env = std::getenv("TERN_FIXTURES"); env != nullptr && *env != '\0') return env;
  return std::filesystem::path(TERN_SOURCE_DIR) / ".." / "shared" / "fixtures";
}

inline bool fixtures_required() {
  const char* env = std::getenv("TERN_REQUIRE_FIXTURES");
  return env != nullptr && std::string(env) == "1";
}

// The path of a fixture file relative to the fixtures folder, e.g. "stories260K/stories260K.gguf".
inline std::string fixture(const std::string& relative) {
  return (fixtures_dir() / relative).string();
}

}  // namespace tern::testing

// Use at the top of a test that needs `relative` (a file or folder under the fixtures).
#define TERN_REQUIRE_FIXTURE(relative)                                          \
  do {                                                                          \
    if (!std::filesystem::exists(::tern::testing::fixture(relative))) {         \
      if (::tern::testing::fixtures_required())                                 \
        FAIL() << "fixture missing: " << ::tern::testing::fixture(relative)     \
               << " (TERN_REQUIRE_FIXTURES=1)";                                 \
      GTEST_SKIP() << "fixture missing: " << ::tern::testing::fixture(relative) \
                   << " (set TERN_FIXTURES to the shared fixtures folder)";     \
    }                                                                           \
  } while (0)
