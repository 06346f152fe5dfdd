// What a --model argument names: a local path, a Hugging Face repository (ORG/NAME), one file
// of it (ORG/NAME/FILE.gguf), or a GGUF quantization of it as llama.cpp writes it
// (ORG/NAME:Q4_K_M); and which of a repository's files a command needs.
#pragma once

#include <string>
#include <vector>

namespace tern::hub {

struct ModelSpec {
  enum class Kind { LocalPath, Repo, RepoFile, RepoQuant };
  Kind kind = Kind::LocalPath;
  std::string path;   // LocalPath: the argument itself
  std::string repo;   // "ORG/NAME"
  std::string file;   // RepoFile: path of the file in the repository
  std::string quant;  // RepoQuant: the tag after ':' (e.g. "Q4_K_M")
};

// An existing file or folder is always a local path; so is anything that cannot be a hub name
// (absolute, ./relative, one word), which the loader then reports as missing.
ModelSpec parse_model_spec(const std::string& spec);

// A valid hub repository id: ORG/NAME, each part of letters, digits, '-', '_', '.', not
// starting with '-' or '.', without "--" or "..", at most 96 characters.
bool is_repo_id(const std::string& text);

// What a command needs from a safetensors repository.
enum class RepoFiles {
  All,        // config, generation config, tokenizer and weights
  NoWeights,  // config, generation config and tokenizer (--load-format dummy)
  Tokenizer,  // tokenizer files and config (tern tokenize)
};

// The top-level config, generation-config and tokenizer files of `files` that `what` needs
// (weights are chosen by the caller: they depend on the index's contents).
std::vector<std::string> select_support_files(const std::vector<std::string>& files,
                                              RepoFiles what);
bool is_tokenizer_file(const std::string& file);

// The .gguf file of `files` whose name ends in the quantization `quant` (case-insensitively,
// after '-', '_' or '.': "model-Q4_K_M.gguf" for Q4_K_M, not for Q4_K). Throws tern::Error
// listing the .gguf files when none or several match.
std::string select_gguf_file(const std::string& repo, const std::vector<std::string>& files,
                             const std::string& quant);
// How to name each of `ggufs` on the command line, for errors that ask the user to choose:
// "ORG/NAME:Q4_K_M (model-Q4_K_M.gguf)" when the tag after the name's last '-' or '.' picks
// that file alone, else "ORG/NAME/FILE.gguf"; comma-separated.
std::string gguf_choices(const std::string& repo, const std::vector<std::string>& ggufs);
// "a, b, c", or "none" for an empty list (in error messages).
std::string list_or_none(const std::vector<std::string>& names);

// The model .gguf files of a listing (not llava's mmproj projectors), sorted.
std::vector<std::string> gguf_files(const std::vector<std::string>& files);

}  // namespace tern::hub
