// The README's commands against the built CLI, so the two cannot drift apart again (it once
// said `bench-throughput` for `bench throughput`): every `build/tern …` line of a code block and
// every inline `tern …` names a command that exists, and each flag it gives is one that command
// takes; every inline `--flag` is a flag of some command; and the examples that need only the
// fixtures run, in order, in a scratch folder, and succeed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.h"
#include "models/model_test_util.h"
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
  // `tern ARGS --help`, or "" when that is no command (its parent's help does not list it:
  // CLI11 answers --help after an unknown word with the parent's help).
  const std::string& help(const std::vector<std::string>& command) {
    std::string key;
    for (const std::string& c : command) key += c + " ";
    auto it = help_.find(key);
    if (it == help_.end()) {
      std::string text;
      const std::vector<std::string> parent(command.begin(),
                                            command.end() - (command.empty() ? 0 : 1));
      if (command.empty() || subcommands(help(parent)).count(command.back())) {
        std::vector<std::string> args = command;
        args.push_back("--help");
        const auto r = run_tern(args);
        if (r.exit_code == 0) text = r.out;
      }
      it = help_.emplace(key, text).first;
    }
    return it->second;
  }
  // The names a help text lists under "Subcommands:".
  static std::set<std::string> subcommands(const std::string& help) {
    std::set<std::string> names;
    const size_t at = help.find("Subcommands:");
    if (at == std::string::npos) return names;
    static const std::regex entry("\n  ([a-z][a-z-]*) ");
    for (std::sregex_iterator it(help.begin() + static_cast<std::ptrdiff_t>(at), help.end(), entry),
         end;
         it != end; ++it)
      names.insert((*it)[1]);
    return names;
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
    const bool top_level_flag = words[1][0] == '-';  // tern --version
    std::vector<std::string> command;
    if (!top_level_flag) command.push_back(words[1]);
    std::string help = cli.help(command);
    EXPECT_FALSE(help.empty()) << "README: `tern " << words[1] << "` is no command: " << line;
    if (help.empty()) continue;
    size_t next = top_level_flag ? 1 : 2;
    if (!top_level_flag && Cli::has_subcommands(help) && next < words.size()) {
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
            << "README: tern" << (command.empty() ? "" : " " + command[0])
            << (command.size() > 1 ? " " + command[1] : "") << " has no flag " << flag << ": "
            << line;
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

// The line without its optional parts ([--json], [--ctx 512]); brackets inside quotes stay.
std::string without_optional(const std::string& line) {
  std::string out;
  char quote = 0;
  int depth = 0;
  for (char c : line) {
    if (quote) {
      if (c == quote) quote = 0;
      if (depth == 0) out += c;
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    if (c == '[') ++depth;
    if (depth == 0) out += c;
    if (c == ']' && depth > 0) --depth;
  }
  return out;
}

std::string shell_quote(const std::string& word) {
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool is_placeholder(const std::string& word) {  // MODEL, PATH, N, KEY
  return std::regex_match(word, std::regex("[A-Z][A-Z0-9_]*"));
}

bool is_path(const std::string& word) {
  if (std::regex_match(word, std::regex("[0-9.]+[A-Za-z]*/s"))) return false;  // 936GB/s
  return word.find('/') != std::string::npos ||
         std::regex_search(word, std::regex("\\.(gguf|jsonl|txt|kld|json|safetensors)$"));
}

// What a README line writes (its outputs need not exist before it runs).
std::set<std::string> outputs_of(const std::vector<std::string>& words) {
  std::set<std::string> out;
  const bool kld_compare = std::find(words.begin(), words.end(), "--kl-divergence") != words.end();
  int positional = 0;
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    const std::string& prev = words[i - 1];
    if (prev == "-o" || prev == "--output" || prev == "--save-gguf" ||
        (prev == "--kl-divergence-base" && !kld_compare))
      out.insert(w);
    if (words[1] == "quantize" && i > 1 && w[0] != '-' && (prev[0] != '-' || i == 2) &&
        ++positional == 2)
      out.insert(w);  // tern quantize IN OUT TYPE
  }
  if (words[0] == "scripts/make-eval-text.sh") out.insert(words[1]);
  return out;
}

TEST(Readme, TheFixtureExamplesRun) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string fixtures = testing::fixtures_dir().string();
  testing::TempDir work("readme-examples");
  std::istringstream in(readme());
  bool code = false;
  std::map<std::string, std::string> vars;  // M=… lines of the block
  std::string pending;
  int ran = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      code = !code;
      vars.clear();
      continue;
    }
    if (!code) continue;
    static const std::regex assignment("([A-Z]+)=(\\S+)");
    if (std::smatch m; pending.empty() && std::regex_match(line, m, assignment)) {
      vars[m[1]] = m[2];
      continue;
    }
    if (pending.empty() && line.rfind("$ build/tern ", 0) == 0) line.erase(0, 2);  // a prompt
    if (pending.empty() && line.rfind("build/tern ", 0) != 0 &&
        line.rfind("scripts/make-eval-text.sh ", 0) != 0)
      continue;
    pending += line;
    if (pending.back() == '\\') {
      pending.back() = ' ';
      continue;
    }
    std::string command = without_optional(pending);
    pending.clear();
    for (const auto& [name, value] : vars)
      command = std::regex_replace(command, std::regex("\\$" + name + "\\b"), value);
    command = std::regex_replace(command, std::regex("\\.\\./shared/fixtures"), fixtures);
    std::vector<std::string> words = shell_words(command);
    if (words[0] == "build/tern") words[0] = "tern";
    const std::string sub = words.size() > 1 ? words[1] : "";
    const bool needs_a_server = sub == "serve" || sub == "router" ||
                                (sub == "bench" && words.size() > 2 && words[2] == "serve");
    const std::set<std::string> outputs = outputs_of(words);
    bool runnable = !needs_a_server;
    for (const std::string& w : words) {
      const std::filesystem::path p =
          std::filesystem::path(w).is_absolute() ? std::filesystem::path(w) : work.path() / w;
      if (is_placeholder(w) || w.find('|') != std::string::npos) runnable = false;
      if (&w != &words[0] && is_path(w) && !outputs.count(w) && !std::filesystem::exists(p))
        runnable = false;  // an input the README names but the fixtures lack (big.gguf)
      // Speed examples on a real-sized model are for a machine, not a test.
      if (std::filesystem::is_regular_file(p) && std::filesystem::file_size(p) > (64 << 20))
        runnable = false;
    }
    if (!runnable) continue;
    std::string shell = "cd " + shell_quote(work.path().string()) + " && ";
    if (words[0] == "scripts/make-eval-text.sh") {
      // Four stories a file, not 128: the files' form, not their size, is what follows needs.
      shell += "EVAL_STORIES=4 " + shell_quote(std::string(TERN_SOURCE_DIR) + "/" + words[0]) +
               " " + shell_quote(words[1]) + " " + shell_quote(TERN_BINARY);
    } else {
      shell += shell_quote(TERN_BINARY);
      for (size_t i = 1; i < words.size(); ++i) shell += " " + shell_quote(words[i]);
    }
    const auto r = testing::run_process("/bin/sh", {"-c", shell});
    EXPECT_EQ(r.exit_code, 0) << "README example failed: " << command << "\n" << r.err;
    ++ran;
  }
  // The generate, quantization, perplexity, KV-dtype and plan examples at least.
  EXPECT_GE(ran, 11) << "fewer README examples ran than the README has";
}

}  // namespace
}  // namespace tern
