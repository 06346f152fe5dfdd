// The tern command line: one binary, one subcommand per job.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "tern/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"tern: LLM inference engine and server"};
  app.require_subcommand(1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tern: %s\n", e.what());
    return 1;
  }
  return 0;
}
