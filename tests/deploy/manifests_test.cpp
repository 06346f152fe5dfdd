// deploy/llm-d/ read as the cluster would (tests/deploy/check_manifests.py, with Debian's
// python3-yaml), against this build's `tern serve --help` and a live /metrics page.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "server/server_test_util.h"

namespace tern::testing {
namespace {

TEST(Manifests, LlmdDeploymentIsWhatTernAndTheStackRead) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tern-manifests-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const ProcessResult help = run_tern({"serve", "--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  std::ofstream(dir / "help.txt") << help.out;
  {
    TestServer s(stories260k(), server_engine());
    std::ofstream(dir / "metrics.txt") << get(s.port(), "/metrics").body;
  }
  const ProcessResult r = run_process(
      "/usr/bin/python3", {std::string(TERN_SOURCE_DIR) + "/tests/deploy/check_manifests.py",
                           std::string(TERN_SOURCE_DIR) + "/deploy/llm-d",
                           (dir / "help.txt").string(), (dir / "metrics.txt").string()});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("manifests: ok"), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace tern::testing
