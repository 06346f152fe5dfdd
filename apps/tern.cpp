// The tern command line: one binary, one subcommand per job (apps/commands/).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "commands/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"tern: LLM inference engine and server"};
  app.require_subcommand(1);
  tern::cli::add_inspect_command(app);
  tern::cli::add_tokenize_command(app);
  tern::cli::add_generate_command(app);
  tern::cli::add_bench_model_command(app);
  tern::cli::add_perplexity_command(app);
  tern::cli::add_serve_command(app);
  tern::cli::add_quantize_command(app);
  tern::cli::add_imatrix_command(app);
  tern::cli::add_plan_command(app);
  tern::cli::add_router_command(app);
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: offline throughput, a serving load");
  bench->require_subcommand(1);
  tern::cli::add_bench_throughput_command(*bench);
  tern::cli::add_bench_serve_command(*bench);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    // File, request and configuration problems: one line on stderr, exit code 1.
    std::fprintf(stderr, "tern: %s\n", e.what());
    return 1;
  }
  return 0;
}
