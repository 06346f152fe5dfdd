// ModelSpec parsing and the choice of a repository's files.
#include "tern/hub/model_spec.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "tern/core/ascii.h"
#include "tern/core/error.h"

namespace tern::hub {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_repo_part(const std::string& part) {
  if (part.empty() || part.front() == '-' || part.front() == '.') return false;
  if (part.find("--") != std::string::npos || part.find("..") != std::string::npos) return false;
  return std::all_of(part.begin(), part.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.';
  });
}

}  // namespace

std::string list_or_none(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool is_repo_id(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos || text.size() > 96) return false;
  return is_repo_part(text.substr(0, slash)) && is_repo_part(text.substr(slash + 1));
}

ModelSpec parse_model_spec(const std::string& spec) {
  ModelSpec out;
  out.path = spec;
  std::error_code ec;
  if (spec.empty() || std::filesystem::exists(spec, ec)) return out;
  if (const size_t colon = spec.rfind(':'); colon != std::string::npos) {
    const std::string repo = spec.substr(0, colon), quant = spec.substr(colon + 1);
    if (!is_repo_id(repo)) return out;
    if (quant.empty() || quant.find('/') != std::string::npos)
      throw Error(spec + ": expected ORG/NAME:QUANT with a quantization such as Q4_K_M after ':'");
    out.kind = ModelSpec::Kind::RepoQuant;
    out.repo = repo;
    out.quant = quant;
    return out;
  }
  const size_t first = spec.find('/');
  if (first == std::string::npos) return out;
  const size_t second = spec.find('/', first + 1);
  if (second == std::string::npos) {
    if (!is_repo_id(spec)) return out;
    out.kind = ModelSpec::Kind::Repo;
    out.repo = spec;
    return out;
  }
  const std::string repo = spec.substr(0, second);
  if (!is_repo_id(repo)) return out;
  if (!ends_with(ascii_lower(spec), ".gguf"))
    throw Error(spec +
                ": no such file or folder; as a Hugging Face model give ORG/NAME (safetensors), "
                "ORG/NAME/FILE.gguf or ORG/NAME:QUANT");
  out.kind = ModelSpec::Kind::RepoFile;
  out.repo = repo;
  out.file = spec.substr(second + 1);
  return out;
}

bool is_tokenizer_file(const std::string& file) {
  static const std::set<std::string> kNames = {
      "tokenizer.json",    "tokenizer_config.json",   "tokenizer.model",   "vocab.json",
      "merges.txt",        "special_tokens_map.json", "added_tokens.json", "chat_template.jinja",
      "chat_template.json"};
  return kNames.count(file) > 0;
}

std::vector<std::string> select_support_files(const std::vector<std::string>& files,
                                              RepoFiles what) {
  std::vector<std::string> out;
  for (const auto& f : files) {
    const bool config = f == "config.json";
    const bool generation = f == "generation_config.json" && what != RepoFiles::Tokenizer;
    if (config || generation || is_tokenizer_file(f)) out.push_back(f);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> gguf_files(const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) {
    const std::string base = ascii_lower(std::filesystem::path(f).filename().string());
    if (ends_with(base, ".gguf") && base.rfind("mmproj", 0) != 0) out.push_back(f);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string select_gguf_file(const std::string& repo, const std::vector<std::string>& files,
                             const std::string& quant) {
  const std::vector<std::string> candidates = gguf_files(files);
  const std::string tag = ascii_lower(quant);
  std::vector<std::string> matches;
  for (const auto& f : candidates) {
    std::string stem = ascii_lower(std::filesystem::path(f).filename().string());
    stem.resize(stem.size() - 5);  // ".gguf"
    if (!ends_with(stem, tag)) continue;
    const size_t at = stem.size() - tag.size();
    if (at == 0 || stem[at - 1] == '-' || stem[at - 1] == '_' || stem[at - 1] == '.')
      matches.push_back(f);
  }
  if (matches.size() == 1) return matches.front();
  if (matches.empty())
    throw Error(repo + ": no .gguf file for the quantization '" + quant +
                "'; the repository has: " + list_or_none(candidates));
  throw Error(repo + ": the quantization '" + quant + "' matches several files (" +
              list_or_none(matches) + "); name one as " + repo + "/FILE.gguf");
}

std::string gguf_choices(const std::string& repo, const std::vector<std::string>& ggufs) {
  std::string out;
  for (const auto& f : ggufs) {
    std::string stem = std::filesystem::path(f).filename().string();
    stem.resize(stem.size() - 5);  // ".gguf"
    const size_t cut = stem.find_last_of("-.");
    std::string choice = repo + "/" + f;
    if (cut != std::string::npos && cut + 1 < stem.size()) {
      // Only a tag that select_gguf_file would resolve to this very file is offered.
      const std::string tag = stem.substr(cut + 1);
      try {
        if (select_gguf_file(repo, ggufs, tag) == f) choice = repo + ":" + tag + " (" + f + ")";
      } catch (const Error&) {
      }
    }
    out += (out.empty() ? "" : ", ") + choice;
  }
  return out;
}

}  // namespace tern::hub
