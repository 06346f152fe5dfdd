// The tern command line: one binary, one subcommand per job (apps/commands/).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "tern/core/did_you_mean.h"
#include "tern/core/version.h"

namespace {

const std::string kVersionLine = std::string("tern ") + tern::kTernVersion;

// `--version` on the binary and on every command, as users of other CLIs type it.
void add_version_flags(CLI::App& app) {
  app.set_version_flag("--version", kVersionLine, "Print tern's version and exit");
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) add_version_flags(*sub);
}

// The deepest subcommand the command line selected (`tern bench serve` → serve).
const CLI::App& selected_command(const CLI::App& app) {
  const std::vector<CLI::App*> selected = app.get_subcommands();
  return selected.empty() ? app : selected_command(*selected.front());
}

// For each argument the command line left unparsed that looks like a flag (a typo: CLI11 then
// reports it, or a required flag it made look missing), the selected command's nearest flag.
void suggest_flags(const CLI::App& app) {
  const CLI::App& cmd = selected_command(app);
  std::vector<std::string> flags;
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const std::string& name : opt->get_lnames()) flags.push_back("--" + name);
    for (const std::string& name : opt->get_snames()) flags.push_back("-" + name);
  }
  std::string name;
  for (const CLI::App* c = &cmd; c->get_parent() != nullptr; c = c->get_parent())
    name = " " + c->get_name() + name;
  name = "tern" + name;
  for (const std::string& word : app.remaining(/*recurse=*/true)) {
    if (word.size() < 2 || word[0] != '-') continue;
    const std::string flag = word.substr(0, word.find('='));
    const std::string near = tern::closest_name(flag, flags);
    if (!near.empty())
      std::fprintf(stderr, "%s has no flag %s: did you mean %s?\n", name.c_str(), flag.c_str(),
                   near.c_str());
  }
}

}  // namespace

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
  tern::cli::add_kernels_command(app);
  CLI::App* bench = app.add_subcommand(
      "bench", "Benchmarks: offline throughput, a serving load, the experiment suite");
  bench->require_subcommand(1);
  tern::cli::add_bench_throughput_command(*bench);
  tern::cli::add_bench_serve_command(*bench);
  tern::cli::add_bench_suite_command(*bench);
  app.add_subcommand("version", "Print tern's version")->callback([] {
    std::printf("%s\n", kVersionLine.c_str());
  });
  add_version_flags(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    if (code != 0) suggest_flags(app);
    return code;
  } catch (const std::exception& e) {
    // File, request and configuration problems: one line on stderr, exit code 1.
    std::fprintf(stderr, "tern: %s\n", e.what());
    return 1;
  }
  return 0;
}
