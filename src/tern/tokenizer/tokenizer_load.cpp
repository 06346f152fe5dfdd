// Tokenizer loaders: GGUF metadata, SentencePiece tokenizer.model (+ tokenizer_config.json),
// Hugging Face folders, and the path dispatch of Tokenizer::load.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/formats/gguf.h"
#include "tern/tokenizer/tokenizer.h"
#include "tern/tokenizer/tokenizer_impl.h"

namespace tern {
namespace {

namespace fs = std::filesystem;

std::optional<int32_t> gguf_id(const GgufFile& gguf, std::string_view key) {
  const auto v = gguf.get_int(key);
  if (!v) return std::nullopt;
  // llama.cpp writes -1 (or 0xFFFFFFFF as u32) for "no such token".
  if (*v < 0 || *v == 0xFFFFFFFF) return std::nullopt;
  if (*v > INT32_MAX)
    throw Error(gguf.path() + ": " + std::string(key) + " " + std::to_string(*v) +
                " is not a token id");
  return static_cast<int32_t>(*v);
}

// tokenizer_config.json writes special tokens as a string or as {"content": ...}.
std::optional<std::string> token_content(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string())
    return j["content"].get<std::string>();
  return std::nullopt;
}

// Applies a tokenizer_config.json to a SentencePiece tokenizer: added tokens (appended when
// their id is past the model's pieces), add_bos/add_eos, bos/eos by content, chat template.
void apply_tokenizer_config(Tokenizer::Impl& t, std::string_view text, const std::string& name) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(name + ": invalid JSON: " + e.what());
  }
  if (!config.is_object()) throw Error(name + ": not a JSON object");
  t.derive_token_flags();
  if (auto it = config.find("added_tokens_decoder"); it != config.end() && it->is_object()) {
    for (const auto& [key, value] : it->items()) {
      int64_t id = -1;
      try {
        size_t used = 0;
        id = std::stoll(key, &used);
        if (used != key.size()) id = -1;
      } catch (const std::exception&) {
      }
      const auto content = token_content(value);
      if (id < 0 || id > 16'000'000 || !content || content->empty())
        throw Error(name + ": added_tokens_decoder entry '" + key + "' is not an id with content");
      const bool special = value.value("special", false);
      auto i = static_cast<size_t>(id);
      if (i >= t.vocab.tokens.size()) {
        // Ids between the model's pieces and this one stay unused, empty tokens.
        t.vocab.tokens.resize(i + 1);
        t.vocab.scores.resize(i + 1, 0.0f);
        t.vocab.types.resize(i + 1, TokenType::Unused);
        t.match.resize(i + 1, TokenMatch::Never);
        t.special.resize(i + 1, 0);
      }
      if (t.vocab.tokens[i] != *content && !t.vocab.tokens[i].empty())
        throw Error(name + ": added token " + key + " '" + *content +
                    "' differs from the model's piece '" + t.vocab.tokens[i] + "'");
      t.vocab.tokens[i] = *content;
      if (t.vocab.types[i] == TokenType::Unused || t.vocab.types[i] == TokenType::Normal)
        t.vocab.types[i] = special ? TokenType::Control : TokenType::UserDefined;
      t.match[i] = special ? TokenMatch::ParseSpecial : TokenMatch::Always;
      t.special[i] = special ? 1 : 0;
    }
  }
  t.vocab.build_index();
  auto find_token = [&](const char* key) -> std::optional<int32_t> {
    auto it = config.find(key);
    if (it == config.end()) return std::nullopt;
    const auto content = token_content(*it);
    if (!content) return std::nullopt;
    return t.vocab.find(*content);
  };
  if (auto id = find_token("bos_token")) t.bos = id;
  if (auto id = find_token("eos_token")) t.eos = id;
  if (auto id = find_token("unk_token")) t.unk = id;
  if (auto id = find_token("pad_token")) t.pad = id;
  if (auto it = config.find("add_bos_token"); it != config.end() && it->is_boolean())
    t.add_bos = it->get<bool>();
  if (auto it = config.find("add_eos_token"); it != config.end() && it->is_boolean())
    t.add_eos = it->get<bool>();
  if (auto it = config.find("chat_template"); it != config.end()) {
    if (it->is_string()) {
      t.chat_template = it->get<std::string>();
    } else if (it->is_array()) {
      // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
      for (const auto& entry : *it) {
        if (!entry.is_object() || !entry.contains("template") || !entry["template"].is_string())
          continue;
        if (t.chat_template.empty() || entry.value("name", "") == "default")
          t.chat_template = entry["template"].get<std::string>();
      }
    }
  }
}

bool has_gguf_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

Tokenizer load_sentencepiece_file(const fs::path& model_path) {
  const fs::path config = model_path.parent_path() / "tokenizer_config.json";
  std::string config_text;
  if (fs::is_regular_file(config)) config_text = read_text_file(config.string());
  return Tokenizer::from_sentencepiece(
      read_sentencepiece_model(model_path.string()), config_text,
      fs::is_regular_file(config) ? config.string() : model_path.string());
}

}  // namespace

Tokenizer Tokenizer::from_sentencepiece(SentencePieceModel model, std::string_view config_json,
                                        const std::string& name) {
  auto t = std::make_shared<Impl>();
  t->name = name;
  t->kind = TokenizerKind::SentencePieceBpe;
  t->vocab = std::move(model.vocab);
  t->spm_options.add_dummy_prefix = model.add_dummy_prefix;
  t->spm_options.remove_extra_whitespaces = model.remove_extra_whitespaces;
  t->spm_options.escape_whitespaces = model.escape_whitespaces;
  t->spm_options.byte_fallback = model.byte_fallback;
  t->bos = model.bos_id;
  t->eos = model.eos_id;
  t->unk = model.unk_id;
  t->pad = model.pad_id;
  // SentencePiece and Hugging Face's Llama tokenizers add <s> by default.
  t->add_bos = t->bos.has_value();
  if (!config_json.empty()) apply_tokenizer_config(*t, config_json, name);
  t->finalize();
  return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::from_hf_files(HfTokenizerFiles files, const std::string& name) {
  auto t = std::make_shared<Impl>();
  t->name = name;
  t->kind = files.kind;
  t->vocab = std::move(files.vocab);
  t->merges = std::move(files.merges);
  t->byte_level = files.byte_level;
  if (t->vocab.types.size() != t->vocab.tokens.size())
    t->vocab.types.resize(t->vocab.tokens.size(), TokenType::Normal);
  if (t->kind == TokenizerKind::SentencePieceBpe &&
      t->vocab.scores.size() != t->vocab.tokens.size())
    throw Error(name + ": SentencePiece-style tokenizer without scores");
  t->derive_token_flags();
  for (const AddedToken& added : files.added_tokens) {
    if (added.id < 0 || added.id >= t->vocab.size())
      throw Error(name + ": added token '" + added.content + "' has id " +
                  std::to_string(added.id) + " outside the vocabulary");
    const auto i = static_cast<size_t>(added.id);
    t->match[i] = added.special ? TokenMatch::ParseSpecial : TokenMatch::Always;
    t->special[i] = added.special ? 1 : 0;
  }
  t->bos = files.bos_id;
  t->eos = files.eos_id;
  t->unk = files.unk_id;
  t->pad = files.pad_id;
  t->add_bos = files.add_bos;
  t->add_eos = files.add_eos;
  t->chat_template = std::move(files.chat_template);
  t->finalize();
  return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::from_gguf(const GgufFile& gguf) {
  const std::string& path = gguf.path();
  auto t = std::make_shared<Impl>();
  t->name = path;
  const auto model = gguf.get_string("tokenizer.ggml.model");
  if (!model) throw Error(path + ": no tokenizer (tokenizer.ggml.model is missing)");
  auto tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  if (!tokens || tokens->empty()) throw Error(path + ": tokenizer.ggml.tokens is missing or empty");
  const size_t n = tokens->size();
  t->vocab.tokens = std::move(*tokens);

  if (auto types = gguf.get_int_array("tokenizer.ggml.token_type")) {
    if (types->size() != n)
      throw Error(path + ": tokenizer.ggml.token_type has " + std::to_string(types->size()) +
                  " entries for " + std::to_string(n) + " tokens");
    t->vocab.types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t v = (*types)[i];
      if (v < 0 || v > 6)
        throw Error(path + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] is " +
                    std::to_string(v) + ", not a token type (0..6)");
      t->vocab.types.push_back(static_cast<TokenType>(v));
    }
  } else {
    t->vocab.types.assign(n, TokenType::Normal);
  }
  if (auto scores = gguf.get_float_array("tokenizer.ggml.scores")) {
    if (scores->size() != n)
      throw Error(path + ": tokenizer.ggml.scores has " + std::to_string(scores->size()) +
                  " entries for " + std::to_string(n) + " tokens");
    t->vocab.scores = std::move(*scores);
  }

  if (*model == "llama") {
    t->kind = TokenizerKind::SentencePieceBpe;
    if (t->vocab.scores.empty())
      throw Error(path + ": tokenizer.ggml.scores is required for a 'llama' tokenizer");
    t->spm_options.add_dummy_prefix =
        gguf.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
    t->spm_options.remove_extra_whitespaces =
        gguf.get_bool("tokenizer.ggml.remove_extra_whitespaces").value_or(false);
    t->spm_options.byte_fallback = true;
    // llama.cpp's defaults for SentencePiece vocabularies.
    t->bos = 1;
    t->eos = 2;
    t->unk = 0;
    t->add_bos = true;
  } else if (*model == "gpt2") {
    t->kind = TokenizerKind::ByteLevelBpe;
    auto merges = gguf.get_string_array("tokenizer.ggml.merges");
    if (!merges) throw Error(path + ": tokenizer.ggml.merges is required for a 'gpt2' tokenizer");
    t->merges = std::move(*merges);
    const std::string pre = gguf.get_string("tokenizer.ggml.pre").value_or("default");
    PreTokenizer pt = PreTokenizer::Gpt2;
    if (pre != "default") {
      try {
        pt = pre_tokenizer_from_gguf(pre);
      } catch (const Error& e) {
        throw Error(path + ": " + e.what());
      }
    }
    t->byte_level = default_byte_level_options(pt);
    // llama.cpp adds <|begin_of_text|> by default for the Llama 3 family and nothing for other
    // byte-level vocabularies; tokenizer.ggml.add_bos_token overrides both below.
    t->add_bos = pt == PreTokenizer::Llama3;
  } else {
    throw Error(path + ": tokenizer.ggml.model '" + *model +
                "' is not supported (tern reads 'llama' and 'gpt2')");
  }

  if (gguf.find("tokenizer.ggml.bos_token_id"))
    t->bos = gguf_id(gguf, "tokenizer.ggml.bos_token_id");
  if (gguf.find("tokenizer.ggml.eos_token_id"))
    t->eos = gguf_id(gguf, "tokenizer.ggml.eos_token_id");
  if (gguf.find("tokenizer.ggml.unknown_token_id"))
    t->unk = gguf_id(gguf, "tokenizer.ggml.unknown_token_id");
  if (gguf.find("tokenizer.ggml.padding_token_id"))
    t->pad = gguf_id(gguf, "tokenizer.ggml.padding_token_id");
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (auto id = gguf_id(gguf, key)) t->eos_ids.push_back(*id);
  }
  if (auto v = gguf.get_bool("tokenizer.ggml.add_bos_token")) t->add_bos = *v;
  if (auto v = gguf.get_bool("tokenizer.ggml.add_eos_token")) t->add_eos = *v;
  t->chat_template = gguf.get_string("tokenizer.chat_template").value_or("");
  t->derive_token_flags();
  t->finalize();
  return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::load(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    for (const char* file : {"tokenizer.json", "vocab.json", "encoder.json"}) {
      if (fs::is_regular_file(p / file)) return from_hf_files(load_hf_tokenizer_files(path), path);
    }
    if (fs::is_regular_file(p / "tokenizer.model"))
      return load_sentencepiece_file(p / "tokenizer.model");
    throw Error(path +
                ": no tokenizer found (looked for tokenizer.json, vocab.json, "
                "encoder.json and tokenizer.model)");
  }
  if (!fs::is_regular_file(p, ec)) throw Error(path + ": no such file or folder");
  if (has_gguf_magic(path)) return from_gguf(GgufFile::open(path));
  const std::string filename = p.filename().string();
  if (p.extension() == ".model") return load_sentencepiece_file(p);
  if (filename == "tokenizer.json" || filename == "vocab.json" || filename == "encoder.json" ||
      filename == "tokenizer_config.json")
    return from_hf_files(load_hf_tokenizer_files(p.parent_path().string()),
                         p.parent_path().string());
  throw Error(path +
              ": not a tokenizer (expected a .gguf file, a SentencePiece .model file or "
              "a Hugging Face tokenizer folder)");
}

}  // namespace tern
