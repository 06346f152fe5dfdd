// See habit_flags.h. A flag whose meaning tern does not have fails in its callback, during
// parsing: the command never starts.
#include "commands/habit_flags.h"

#include <CLI/CLI.hpp>
#include <string>

#include "commands/engine_options.h"
#include "tern/core/error.h"

namespace tern::cli {
namespace {

// Listed apart in --help, after tern's own flags.
constexpr const char* kHabits = "Names from vLLM and llama.cpp";

}  // namespace

std::vector<std::string> spell_out_habit_flags(int argc, char** argv) {
  // CLI11 reads "-tp" as "-t p" (--threads p): these are spelled out before it sees them.
  static const std::pair<const char*, const char*> kLong[] = {
      {"-tp", "--tensor-parallel-size"},
      {"-pp", "--pipeline-parallel-size"},
      {"-ngl", "--n-gpu-layers"},
  };
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& arg : args)
    for (const auto& [short_name, long_name] : kLong)
      if (arg == short_name) arg = long_name;
  return args;
}

void add_engine_habit_flags(CLI::App* cmd, EngineOptions& engine) {
  cmd->add_flag("--enable-prefix-caching", engine.enable_prefix_caching,
                "vLLM's: prefix caching is on by default")
      ->group(kHabits);
  cmd->add_option("--gpu-memory-utilization", engine.gpu_memory_utilization,
                  "vLLM's: the share of a GPU's memory (--device vulkan) the instance may hold, "
                  "weights and KV cache together (default 0.9); the KV cache gets what is left")
      ->group(kHabits);
  for (const char* flag : {"--tensor-parallel-size", "--pipeline-parallel-size"})
    cmd->add_option_function<int>(
           flag,
           [flag](int n) {
             if (n == 1) return;  // one instance in one process: what tern does
             throw Error(std::string(flag) + " " + std::to_string(n) +
                         ": tern runs a model in one process, on one machine's cores "
                         "(--threads); to serve from several, run one tern serve each and put "
                         "tern router in front (--backend URL...)");
           },
           "vLLM's (-tp, -pp): 1 only, one process")
        ->group(kHabits);
  cmd->add_flag("--trust-remote-code")
      ->description("vLLM's: tern runs no model code, so there is none to trust")
      ->group(kHabits);
  cmd->add_option("-c,--ctx-size", engine.ctx_size, "llama.cpp's name of --max-model-len")
      ->group(kHabits);
  cmd->add_option_function<int>(
         "--n-gpu-layers,--gpu-layers",
         [](int n) {
           if (n == 0) return;  // every layer on the CPU: what tern does
           throw Error("-ngl " + std::to_string(n) +
                       ": tern runs the whole model on one device, chosen by --device (cpu, "
                       "vulkan[:N]); it does not split a model's layers between devices");
         },
         "llama.cpp's -ngl: 0 only; --device vulkan runs every layer on the GPU")
      ->group(kHabits);
}

void add_serve_habit_flags(CLI::App* cmd) {
  cmd->add_flag("--disable-log-requests")
      ->description("vLLM's: tern serve logs no request")
      ->group(kHabits);
}

}  // namespace tern::cli
