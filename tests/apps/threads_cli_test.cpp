// --threads beyond the cores this process may run on is accepted with one warning line, in
// every command that takes it (the model commands, quantize, plan); up to the cores, no word.
#include <gtest/gtest.h>
#include <omp.h>

#include <string>
#include <vector>

#include "fixtures.h"
#include "models/model_test_util.h"
#include "run_process.h"

namespace tern {
namespace {

using testing::fixture;
using testing::run_tern;

TEST(ThreadsCli, MoreThreadsThanCoresWarnOnce) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-8b/config.json");
  const std::string model = fixture("stories260K/stories260K.gguf");
  // The children inherit this process's affinity mask: the same cores.
  const int cores = omp_get_num_procs();
  const std::string too_many = std::to_string(cores + 1);
  const std::string warning = "warning: --threads " + too_many + " is more than the " +
                              std::to_string(cores) + " cores this process may run on";
  testing::TempDir dir("threads-cli");
  const std::vector<std::vector<std::string>> commands = {
      {"generate", "--model", model, "--prompt", "Once", "-n", "2"},
      {"quantize", model, dir.file("q8.gguf"), "q8_0"},
      {"plan", fixture("model-configs/qwen3-8b"), "--bandwidth", "100GB/s"},
  };
  for (const auto& command : commands) {
    std::vector<std::string> args = command;
    args.insert(args.end(), {"--threads", too_many});
    auto r = run_tern(args);
    EXPECT_EQ(r.exit_code, 0) << command[0] << ": " << r.err;
    const size_t at = r.err.find(warning);
    EXPECT_NE(at, std::string::npos) << command[0] << ": " << r.err;
    EXPECT_EQ(r.err.find(warning, at + 1), std::string::npos) << "once: " << r.err;

    args = command;
    args.insert(args.end(), {"-t", std::to_string(cores)});
    r = run_tern(args);
    EXPECT_EQ(r.exit_code, 0) << command[0] << ": " << r.err;
    EXPECT_EQ(r.err.find("warning: --threads"), std::string::npos) << command[0] << ": " << r.err;
  }
}

}  // namespace
}  // namespace tern
