// --device on every command that loads a model (and on plan): the device this build has runs
// the model with the same output as no flag; any other name is refused before anything loads,
// naming the devices there are.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fixtures.h"
#include "run_process.h"

namespace tern {
namespace {

using testing::fixture;
using testing::run_tern;

TEST(DeviceCli, EveryModelCommandTakesTheDeviceAndRefusesOthersByName) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  const std::vector<std::vector<std::string>> commands = {
      {"generate", "--model", model, "--prompt", "Once", "-n", "4", "--temperature", "0"},
      {"bench-model", model, "-p", "8", "-n", "4", "--json"},
      {"plan", model, "--bandwidth", "100GB/s"},
  };
  for (const auto& command : commands) {
    std::vector<std::string> args = command;
    args.insert(args.end(), {"--device", "cpu"});
    const auto on_cpu = run_tern(args);
    EXPECT_EQ(on_cpu.exit_code, 0) << command[0] << ": " << on_cpu.err;
    if (command[0] == "generate") {
      EXPECT_EQ(on_cpu.out, run_tern(command).out);
    }

    args = command;
    args.insert(args.end(), {"--device", "cuda"});
    const auto refused = run_tern(args);
    EXPECT_NE(refused.exit_code, 0) << command[0];
    EXPECT_NE(refused.err.find("--device cuda: this build has no such device (cpu)"),
              std::string::npos)
        << command[0] << ": " << refused.err;
    EXPECT_EQ(refused.err.find("loading"), std::string::npos) << "refused before loading";
  }
}

}  // namespace
}  // namespace tern
