// The tern command line: one binary, one subcommand per job (apps/commands/).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "commands/habit_flags.h"
#include "tern/core/did_you_mean.h"
#include "tern/core/error.h"
#include "tern/core/version.h"
#include "tern/kernels/cpu/vec_dot.h"

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

// The command that argv's leading words name (`tern bench serve …` → serve), before parsing;
// `unknown` is set to the first word that names none where a command was due.
CLI::App* command_named(CLI::App& app, int argc, char** argv, std::string* unknown = nullptr) {
  CLI::App* cmd = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') break;
    CLI::App* sub = nullptr;
    for (CLI::App* s : cmd->get_subcommands([](CLI::App*) { return true; }))
      if (s->check_name(word)) sub = s;
    if (!sub) {
      if (unknown && !cmd->get_subcommands([](CLI::App*) { return true; }).empty()) *unknown = word;
      break;
    }
    cmd = sub;
  }
  return cmd;
}

// `tern genrate`: the nearest command's name.
void suggest_command(CLI::App& app, int argc, char** argv) {
  std::string unknown;
  CLI::App* parent = command_named(app, argc, argv, &unknown);
  if (unknown.empty()) return;
  std::vector<std::string> names;
  for (CLI::App* s : parent->get_subcommands([](CLI::App*) { return true; }))
    names.push_back(s->get_name());
  const std::string near = tern::closest_name(unknown, names);
  std::string name;
  for (const CLI::App* c = parent; c->get_parent() != nullptr; c = c->get_parent())
    name = " " + c->get_name() + name;
  if (!near.empty())
    std::fprintf(stderr, "tern%s has no command %s: did you mean %s?\n", name.c_str(),
                 unknown.c_str(), near.c_str());
}

// CLI11 takes the word after an option as its value even when that word is one of the
// command's flags (`--served-model-name --disable-log-stats` served a model named
// "--disable-log-stats"): such a command line is refused before anything runs.
void refuse_flags_as_values(CLI::App& app, int argc, char** argv) {
  const CLI::App* cmd = command_named(app, argc, argv);
  auto known_flag = [cmd](const std::string& word) {
    return word.size() > 2 && word.rfind("--", 0) == 0 &&
           cmd->get_option_no_throw(word.substr(0, word.find('='))) != nullptr;
  };
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string word = argv[i];
    if (word.size() < 2 || word[0] != '-' || word.find('=') != std::string::npos) continue;
    const CLI::Option* opt = cmd->get_option_no_throw(word);
    if (!opt || opt->get_items_expected_max() == 0) continue;  // a flag takes no value
    if (known_flag(argv[i + 1]))
      throw tern::Error(word + " needs a value, and the next word is the flag " +
                        std::string(argv[i + 1]) + " (give " + word + " VALUE)");
  }
}

}  // namespace

int main(int given_argc, char** given_argv) {
  std::vector<std::string> spelled = tern::cli::spell_out_habit_flags(given_argc, given_argv);
  std::vector<char*> args;
  for (std::string& a : spelled) args.push_back(a.data());
  const int argc = static_cast<int>(args.size());
  char** argv = args.data();
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
  tern::cli::add_devices_command(app);
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
    tern::cpu::check_isa_request();
    refuse_flags_as_values(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    if (code != 0) {
      suggest_flags(app);
      suggest_command(app, argc, argv);
    }
    return code;
  } catch (const std::exception& e) {
    // File, request and configuration problems: one line on stderr, exit code 1.
    std::fprintf(stderr, "tern: %s\n", e.what());
    return 1;
  }
  return 0;
}
