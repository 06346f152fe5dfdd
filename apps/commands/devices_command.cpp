// `tern devices`: what --device can name on this machine, and what each device is (for a
// GPU: its driver, memory heaps, subgroup size and the features tern's kernels use).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands/commands.h"
#include "tern/backend/device.h"

namespace tern::cli {

void add_devices_command(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("devices", "List the devices --device can name and what each one is");
  cmd->callback([] { std::printf("%s", describe_devices().c_str()); });
}

}  // namespace tern::cli
