// `tern tokenize`: text → ids (one JSON array on one line), or ids → text with --detokenize.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/hub/resolve_model.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string revision = "main";
  std::string text;
  bool has_text = false;  // --text given (it may be empty)
  std::string text_file;
  bool detokenize = false;
  std::string ids;
  bool no_add_special = false;
  bool no_parse_special = false;
  bool keep_special = false;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array())
    throw Error("--ids: expected a JSON array of token ids, got '" + text + "'");
  std::vector<int32_t> ids;
  for (const auto& v : parsed) {
    if (!v.is_number_integer()) throw Error("--ids: every element must be an integer token id");
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

void run(const TokenizeOptions& opt) {
  Tokenizer tokenizer =
      Tokenizer::load(hub::resolve_model(opt.model, {opt.revision, hub::RepoFiles::Tokenizer}));
  // Each flag belongs to one direction: given to the other, it would be silently ignored.
  if (opt.detokenize) {
    if (opt.ids.empty()) throw Error("--detokenize needs --ids '[…]'");
    if (opt.has_text || !opt.text_file.empty())
      throw Error("--detokenize turns --ids into text: give no --text or --file");
    if (opt.no_add_special || opt.no_parse_special)
      throw Error(
          "--no-add-special-tokens and --no-parse-special apply to tokenizing, not to "
          "--detokenize");
    std::cout << tokenizer.decode(parse_ids(opt.ids), /*skip_special_tokens=*/!opt.keep_special)
              << '\n';
    return;
  }
  if (!opt.ids.empty()) throw Error("--ids goes with --detokenize");
  if (opt.keep_special) throw Error("--keep-special-tokens goes with --detokenize");
  if (opt.has_text && !opt.text_file.empty()) throw Error("give --text or --file, not both");
  std::string text;
  if (opt.has_text) {
    text = opt.text;
  } else if (!opt.text_file.empty()) {
    text = read_text_file(opt.text_file);
  } else if (!isatty(0)) {
    // Piped in, as `echo … | tern tokenize -m M` (llama-tokenize's --stdin).
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    throw Error("give the text to tokenize: --text TEXT, --file F, or on stdin");
  }
  std::vector<int32_t> ids = tokenizer.encode(text, !opt.no_add_special, !opt.no_parse_special);
  std::cout << nlohmann::json(ids).dump() << '\n';
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto opt = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Turn text into token ids, or ids into text");
  cmd->add_option("--model,-m", opt->model,
                  "GGUF file, folder of Hugging Face tokenizer files, or Hugging Face ORG/NAME")
      ->required();
  cmd->add_option("--revision", opt->revision, "Branch, tag or commit of a Hugging Face model");
  cmd->add_option_function<std::string>(
      "--text,-t",
      [opt](const std::string& text) {
        opt->text = text;
        opt->has_text = true;
      },
      "Text to tokenize (default: stdin when it is not a terminal)");
  cmd->add_option("--file,-f", opt->text_file, "Read the text to tokenize from a file");
  cmd->add_flag("--detokenize,-d", opt->detokenize, "Turn --ids back into text");
  cmd->add_option("--ids", opt->ids, "Token ids as a JSON array, for --detokenize");
  cmd->add_flag("--no-add-special-tokens", opt->no_add_special,
                "Do not add BOS/EOS even where the tokenizer asks for them");
  cmd->add_flag("--no-parse-special", opt->no_parse_special,
                "Treat special-token text such as <|im_start|> as plain text");
  cmd->add_flag("--keep-special-tokens", opt->keep_special,
                "With --detokenize, keep the text of special tokens");
  cmd->callback([opt] { run(*opt); });
}

}  // namespace tern::cli
