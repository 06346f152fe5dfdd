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
    EXPECT_NE(refused.err.find("--device cuda: this build has no such device (cpu"),
              std::string::npos)
        << command[0] << ": " << refused.err;
    EXPECT_EQ(refused.err.find("loading"), std::string::npos) << "refused before loading";
  }
}

// Without a Vulkan driver (the loader pointed at none), `tern devices` still lists the CPU and
// says in one line why there is no Vulkan device.
TEST(DeviceCli, DevicesWithoutAVulkanDriverSayWhy) {
#ifndef TERN_VULKAN
  GTEST_SKIP() << "this build has no Vulkan backend";
#else
  const auto devices =
      run_process({TERN_BINARY, "devices"}, {{"VK_ICD_FILENAMES", "/nonexistent/icd.json"}});
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_NE(devices.out.find("cpu "), std::string::npos) << devices.out;
  EXPECT_NE(devices.out.find("\nvulkan: no instance ("), std::string::npos) << devices.out;
  EXPECT_NE(devices.out.find("mesa-vulkan-drivers"), std::string::npos) << devices.out;
#endif
}

// With the Vulkan backend built and a Vulkan device there (lavapipe in CI): `tern devices` lists
// it, and the same commands run on it; generate's greedy text is the CPU's.
TEST(DeviceCli, VulkanDevicesAreListedAndRunTheModelCommands) {
#ifndef TERN_VULKAN
  GTEST_SKIP() << "this build has no Vulkan backend";
#else
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const auto devices = run_tern({"devices"});
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_NE(devices.out.find("cpu "), std::string::npos) << devices.out;
  if (devices.out.find("vulkan:0 ") == std::string::npos) {
    if (testing::fixtures_required()) FAIL() << "no Vulkan device listed:\n" << devices.out;
    GTEST_SKIP() << "no Vulkan device: " << devices.out;
  }
  EXPECT_NE(devices.out.find("subgroup size: "), std::string::npos) << devices.out;
  EXPECT_NE(devices.out.find("memory heap 0: "), std::string::npos) << devices.out;

  const std::string model = fixture("stories260K/stories260K.gguf");
  const std::vector<std::string> generate = {
      "generate", "--model",       model, "--prompt",        "Once", "-n",
      "12",       "--temperature", "0",   "--max-model-len", "64"};
  std::vector<std::string> args = generate;
  args.insert(args.end(), {"--device", "vulkan"});
  const auto on_vulkan = run_tern(args);
  ASSERT_EQ(on_vulkan.exit_code, 0) << on_vulkan.err;
  EXPECT_EQ(on_vulkan.out, run_tern(generate).out);
  // tern plan on the device: its heap is the memory to fit in, its copy bandwidth the ceiling's.
  const auto plan = run_tern({"plan", model, "--device", "vulkan"});
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("the memory heap of vulkan:0"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("measured on vulkan:0 by a copy on the device"), std::string::npos)
      << plan.out;
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"bench-model", model, "-p", "8", "-n", "4", "--json"},
        std::vector<std::string>{"plan", model, "--bandwidth", "100GB/s"}}) {
    args = command;
    args.insert(args.end(), {"--device", "vulkan:0"});
    const auto r = run_tern(args);
    EXPECT_EQ(r.exit_code, 0) << command[0] << ": " << r.err;
  }
  // vLLM's --gpu-memory-utilization sizes the cache from the device's memory; the CPU refuses it.
  args = generate;
  args.insert(args.end(), {"--device", "vulkan", "--gpu-memory-utilization", "0.1"});
  const auto share = run_tern(args);
  EXPECT_EQ(share.exit_code, 0) << share.err;
  EXPECT_NE(share.err.find("--gpu-memory-utilization 0.10 of vulkan:0's"), std::string::npos)
      << share.err;
  args = generate;
  args.insert(args.end(), {"--gpu-memory-utilization", "0.5"});
  const auto on_cpu = run_tern(args);
  EXPECT_EQ(on_cpu.exit_code, 1);
  EXPECT_NE(on_cpu.err.find("on the cpu, --kv-cache-memory"), std::string::npos) << on_cpu.err;

  args = generate;
  args.insert(args.end(), {"--device", "vulkan:9"});
  const auto missing = run_tern(args);
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("--device vulkan:9: there are "), std::string::npos) << missing.err;
#endif
}

}  // namespace
}  // namespace tern
