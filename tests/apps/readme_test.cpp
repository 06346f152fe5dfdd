// The README's commands against the built CLI, so the two cannot drift apart again (it once
// said `bench-throughput` for `bench throughput`): every `build/tern …` line of a code block and
// every inline `tern …` names a command that exists, and each flag it gives is one that command
// takes; every inline `--flag` is a flag of some command.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "run_process.h"

namespace tern {
namespace {

using testing::run_tern;

std::string readme() {
  std::ifstream in(std::string(TERN_SOURCE_DIR) + "/README.md");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Shell words of one command line: quotes group, `#` outside quotes starts a comment, and the
// README's optional brackets ([--json]) and alternatives (a|b) are not part of a word that is a
// flag.
std::vector<std::string> shell_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : line) {
    if (quote) {
      if (c == quote)
        quote = 0;
      else
        word += c;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '#' && !in_word) {
      break;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  for (std::string& w : words) {
    while (!w.empty() && (w.front() == '[')) w.erase(0, 1);
    while (!w.empty() && (w.back() == ']')) w.pop_back();
  }
  return words;
}

// The README's tern command lines: code-block lines from `build/tern` on (continuations joined),
// and inline spans that start with `tern `.
std::vector<std::string> command_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  bool code = false;
  std::string pending;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      code = !code;
      continue;
    }
    if (code) {
      if (pending.empty()) {
        const size_t at = line.find("build/tern ");
        if (at == std::string::npos) continue;
        pending = line.substr(at + 6);  // from "tern "
      } else {
        pending += " " + line;
      }
      if (pending.back() == '\\') {
        pending.pop_back();
        continue;
      }
      out.push_back(pending);
      pending.clear();
      continue;
    }
    static const std::regex inline_command("`(tern [^`]+)`");
    for (std::sregex_iterator it(line.begin(), line.end(), inline_command), end; it != end; ++it)
      out.push_back((*it)[1]);
  }
  return out;
}

class Cli {
 public:
  // `tern ARGS --help`, or "" when that is no command.
  const std::string& help(const std::vector<std::string>& command) {
    std::string key;
    for (const std::string& c : command) key += c + " ";
    auto it = help_.find(key);
    if (it == help_.end()) {
      std::vector<std::string> args = command;
      args.push_back("--help");
      const auto r = run_tern(args);
      it = help_.emplace(key, r.exit_code == 0 ? r.out : std::string()).first;
    }
    return it->second;
  }
  static bool has_subcommands(const std::string& help) {
    return help.find("Subcommands:") != std::string::npos;
  }
  static bool takes(const std::string& help, const std::string& flag) {
    static const std::regex name_end("[ ,=\n]");
    for (size_t at = help.find(flag); at != std::string::npos; at = help.find(flag, at + 1)) {
      const bool starts = at > 0 && (help[at - 1] == ' ' || help[at - 1] == ',');
      const size_t end = at + flag.size();
      if (starts && end < help.size() && std::regex_match(std::string(1, help[end]), name_end))
        return true;
    }
    return false;
  }

 private:
  std::map<std::string, std::string> help_;
};

TEST(Readme, EveryCommandAndFlagExists) {
  const std::string text = readme();
  ASSERT_FALSE(text.empty()) << "README.md not found under " << TERN_SOURCE_DIR;
  Cli cli;
  const std::vector<std::string> lines = command_lines(text);
  EXPECT_GT(lines.size(), 30u) << "the README's commands were not found";
  for (const std::string& line : lines) {
    const std::vector<std::string> words = shell_words(line);
    ASSERT_FALSE(words.empty());
    ASSERT_EQ(words[0], "tern") << line;
    if (words.size() < 2) continue;
    std::vector<std::string> command = {words[1]};
    std::string help = cli.help(command);
    EXPECT_FALSE(help.empty()) << "README: `tern " << words[1] << "` is no command: " << line;
    if (help.empty()) continue;
    size_t next = 2;
    if (Cli::has_subcommands(help) && next < words.size()) {
      command.push_back(words[next++]);
      help = cli.help(command);
      EXPECT_FALSE(help.empty()) << "README: `tern " << command[0] << " " << command[1]
                                 << "` is no command: " << line;
      if (help.empty()) continue;
    }
    for (size_t i = next; i < words.size(); ++i) {
      std::istringstream alternatives(words[i]);
      for (std::string alternative; std::getline(alternatives, alternative, '|');) {
        if (alternative.size() < 2 || alternative[0] != '-' || alternative == "--") continue;
        const std::string flag = alternative.substr(0, alternative.find('='));
        if (flag.find_first_of("0123456789") == 1) continue;  // a negative number
        EXPECT_TRUE(Cli::takes(help, flag))
            << "README: tern " << command[0] << (command.size() > 1 ? " " + command[1] : "")
            << " has no flag " << flag << ": " << line;
      }
    }
  }
}

TEST(Readme, EveryInlineFlagIsSomeCommandsFlag) {
  const std::string text = readme();
  Cli cli;
  std::string every_help;
  const std::string top = cli.help({});
  static const std::regex subcommand("\n  ([a-z-]+) ");
  for (std::sregex_iterator it(top.begin(), top.end(), subcommand), end; it != end; ++it) {
    const std::string name = (*it)[1];
    const std::string& help = cli.help({name});
    every_help += help;
    if (!Cli::has_subcommands(help)) continue;
    for (std::sregex_iterator s(help.begin(), help.end(), subcommand); s != end; ++s)
      every_help += cli.help({name, (*s)[1]});
  }
  ASSERT_NE(every_help.find("--max-model-len"), std::string::npos) << every_help.substr(0, 400);
  static const std::regex inline_flag("`(--[a-z0-9-]+)");
  for (std::sregex_iterator it(text.begin(), text.end(), inline_flag), end; it != end; ++it)
    EXPECT_TRUE(Cli::takes(every_help, (*it)[1])) << "README: no command takes " << (*it)[1];
}

}  // namespace
}  // namespace tern
