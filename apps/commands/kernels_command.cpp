// `tern kernels`: the instruction-set level this CPU runs (what TERN_ISA left of it) and the
// weight type × level table of the kernels behind each matmul, so that nobody has to read the
// dispatcher to know which code runs, on x86-64 or on ARM.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "commands/commands.h"
#include "tern/kernels/cpu/kernel_table.h"
#include "tern/kernels/cpu/vec_dot.h"

namespace tern::cli {

void add_kernels_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "kernels", "Print the instruction set this CPU runs and the kernels of each weight type");
  cmd->callback([] {
    std::string levels;
    for (cpu::Isa isa : cpu::isa_levels())
      if (cpu::isa_supported(isa))
        levels += std::string(levels.empty() ? "" : " ") + cpu::isa_name(isa);
    std::printf("instruction set: %s (this CPU runs: %s; TERN_ISA=<level> runs a lower one)\n\n",
                cpu::isa_name(cpu::best_isa()), levels.c_str());
    std::printf("%s", cpu::kernel_matrix().c_str());
  });
}

}  // namespace tern::cli
