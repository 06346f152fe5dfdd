// Hugging Face tokenizer folders → HfTokenizerFiles: tokenizer.json, or vocab.json + merges.txt
// (encoder.json + vocab.bpe), then tokenizer_config.json on top.
#include "tern/tokenizer/hf_tokenizer_files.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/tokenizer/pre_tokenizer.h"

namespace tern {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
// A file may leave ids unused, but only so many: a stray huge id must not make us allocate a
// vocabulary of billions of holes.
constexpr size_t kMaxHoles = 1024;
// Sequences nest a level or two in real files; a limit keeps the recursion below bounded.
constexpr int kMaxNesting = 16;

enum class Slot : uint8_t { Hole, Regular, AddedSpecial, AddedNormal };

// Everything read so far; finish() turns it into HfTokenizerFiles once all files are in.
struct Draft {
  std::vector<std::string> tokens;
  std::vector<Slot> slots;
  size_t used = 0;
  std::vector<std::string> merges;
  std::string merges_file;  // for messages
  TokenizerKind kind = TokenizerKind::ByteLevelBpe;
  ByteLevelBpeOptions byte_level;
  std::vector<AddedToken> added;
  std::optional<int32_t> bos_id, eos_id;
  std::optional<std::string> bos_text, eos_text, unk_text, pad_text;
  bool add_bos = false;
  bool add_eos = false;
  std::string chat_template;
};

Json parse_json(std::string_view text, const std::string& name) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    throw Error(name + ": not valid JSON (" + e.what() + ")");
  }
}

const Json* member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string string_member(const Json& object, const char* key, const std::string& where) {
  const Json* value = member(object, key);
  if (value == nullptr || !value->is_string())
    throw Error(where + ": '" + key + "' is missing or not a string");
  return value->get<std::string>();
}

bool bool_member(const Json& object, const char* key, bool fallback, const std::string& where) {
  const Json* value = member(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) throw Error(where + ": '" + key + "' is not true or false");
  return value->get<bool>();
}

// Grows the vocabulary to hold `id`, refusing ids that would leave too many holes.
void make_room(Draft& draft, int64_t id, const std::string& where) {
  if (id < 0) throw Error(where + ": token id " + std::to_string(id) + " is negative");
  if (static_cast<uint64_t>(id) >= draft.used * 2 + kMaxHoles)
    throw Error(where + ": token id " + std::to_string(id) + " is out of range (only " +
                std::to_string(draft.used) + " tokens so far)");
  if (static_cast<size_t>(id) >= draft.tokens.size()) {
    draft.tokens.resize(static_cast<size_t>(id) + 1);
    draft.slots.resize(static_cast<size_t>(id) + 1, Slot::Hole);
  }
}

// A {"token": id, …} object (model.vocab, vocab.json, encoder.json).
void read_vocab(Draft& draft, const Json& vocab, const std::string& where) {
  if (!vocab.is_object() || vocab.empty())
    throw Error(where + ": the vocabulary is not a non-empty {\"token\": id} object");
  int64_t max_id = -1;
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer())
      throw Error(where + ": the id of token '" + text + "' is not an integer");
    max_id = std::max(max_id, id.get<int64_t>());
  }
  draft.used += vocab.size();
  make_room(draft, max_id, where);
  for (const auto& [text, id_json] : vocab.items()) {
    const auto id = id_json.get<int64_t>();
    make_room(draft, id, where);
    auto& slot = draft.slots[static_cast<size_t>(id)];
    if (slot != Slot::Hole)
      throw Error(where + ": tokens '" + draft.tokens[static_cast<size_t>(id)] + "' and '" + text +
                  "' have the same id " + std::to_string(id));
    slot = Slot::Regular;
    draft.tokens[static_cast<size_t>(id)] = text;
  }
}

// An added token either takes an unused id or names the regular token already there.
void add_token(Draft& draft, int64_t id, const std::string& content, bool special,
               const std::string& where) {
  if (content.empty()) throw Error(where + ": added token " + std::to_string(id) + " is empty");
  if (id >= 0 && static_cast<size_t>(id) < draft.slots.size() &&
      draft.slots[static_cast<size_t>(id)] == Slot::Hole)
    ++draft.used;
  else if (id >= 0 && static_cast<size_t>(id) >= draft.slots.size())
    ++draft.used;
  make_room(draft, id, where);
  const auto index = static_cast<size_t>(id);
  if (draft.slots[index] != Slot::Hole && draft.tokens[index] != content)
    throw Error(where + ": added token '" + content + "' has id " + std::to_string(id) +
                ", which is already '" + draft.tokens[index] + "'");
  draft.tokens[index] = content;
  draft.slots[index] = special ? Slot::AddedSpecial : Slot::AddedNormal;
  auto same = std::find_if(draft.added.begin(), draft.added.end(),
                           [&](const AddedToken& t) { return t.id == id; });
  if (same != draft.added.end())
    same->special = special;
  else
    draft.added.push_back(AddedToken{static_cast<int32_t>(id), content, special});
}

// "left right" (exactly one space) in the stored form; [left, right] pairs are joined.
void add_merge(Draft& draft, std::string_view line, size_t number, const std::string& where) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
      line.find(' ', space + 1) != std::string_view::npos)
    throw Error(where + ": merge " + std::to_string(number) + " '" + std::string(line) +
                "' is not two tokens separated by one space");
  draft.merges.emplace_back(line);
}

void read_merges_json(Draft& draft, const Json& merges, const std::string& where) {
  if (!merges.is_array()) throw Error(where + ": model.merges is not a list");
  draft.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& merge = merges[i];
    if (merge.is_string()) {
      add_merge(draft, merge.get_ref<const std::string&>(), i + 1, where);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      add_merge(draft, merge[0].get<std::string>() + " " + merge[1].get<std::string>(), i + 1,
                where);
    } else {
      throw Error(where + ": merge " + std::to_string(i + 1) +
                  " is neither \"left right\" nor [\"left\", \"right\"]");
    }
  }
}

struct Normalization {
  bool nfc = false;
  bool sentencepiece = false;  // Prepend "▁" / Replace " " → "▁" (Llama 2 style)
};

void read_normalizer(const Json& n, Normalization& out, const std::string& where, int depth = 0) {
  const std::string type = string_member(n, "type", where + ": normalizer");
  if (type == "Sequence") {
    const Json* list = member(n, "normalizers");
    if (list == nullptr || !list->is_array())
      throw Error(where + ": normalizer Sequence has no 'normalizers' list");
    if (depth >= kMaxNesting) throw Error(where + ": normalizer Sequences nest too deeply");
    for (const Json& item : *list) read_normalizer(item, out, where, depth + 1);
  } else if (type == "NFC") {
    out.nfc = true;
  } else if (type == "Prepend" && string_member(n, "prepend", where + ": Prepend") == kSpace) {
    out.sentencepiece = true;
  } else if (const Json* content = member(n, "content");
             type == "Replace" && content != nullptr && *content == std::string(kSpace)) {
    out.sentencepiece = true;
  } else {
    throw Error(where + ": normalizer '" + type + "' is not supported (NFC, or SentencePiece's " +
                "Prepend/Replace with \xE2\x96\x81)");
  }
}

struct PreTokenization {
  std::optional<PreTokenizer> regex;
  bool metaspace = false;
};

void set_regex(PreTokenization& out, PreTokenizer kind, const std::string& where) {
  if (out.regex && *out.regex != kind)
    throw Error(where + ": pre_tokenizer applies more than one regex, which tern does not support");
  out.regex = kind;
}

void read_pre_tokenizer(const Json& p, PreTokenization& out, const std::string& where,
                        int depth = 0) {
  const std::string type = string_member(p, "type", where + ": pre_tokenizer");
  if (type == "Sequence") {
    const Json* list = member(p, "pretokenizers");
    if (list == nullptr || !list->is_array())
      throw Error(where + ": pre_tokenizer Sequence has no 'pretokenizers' list");
    if (depth >= kMaxNesting) throw Error(where + ": pre_tokenizer Sequences nest too deeply");
    for (const Json& item : *list) read_pre_tokenizer(item, out, where, depth + 1);
  } else if (type == "ByteLevel") {
    if (bool_member(p, "add_prefix_space", false, where + ": ByteLevel"))
      throw Error(where + ": ByteLevel add_prefix_space=true is not supported");
    if (bool_member(p, "use_regex", true, where + ": ByteLevel"))
      set_regex(out, PreTokenizer::Gpt2, where);
  } else if (type == "Split") {
    const Json* pattern = member(p, "pattern");
    const Json* regex = pattern == nullptr ? nullptr : member(*pattern, "Regex");
    if (regex == nullptr || !regex->is_string())
      throw Error(where + ": Split pre-tokenizer without a Regex pattern is not supported");
    const std::string text = regex->get<std::string>();
    const std::optional<PreTokenizer> kind = pre_tokenizer_from_pattern(text);
    if (!kind)
      throw Error(where + ": Split regex '" + text +
                  "' is not one tern knows (GPT-2, Llama 3, Qwen2, o200k)");
    const Json* behavior = member(p, "behavior");
    if ((behavior != nullptr && *behavior != "Isolated") ||
        bool_member(p, "invert", false, where + ": Split"))
      throw Error(where + ": Split must have behavior Isolated and invert false");
    set_regex(out, *kind, where);
  } else if (type == "Metaspace") {
    out.metaspace = true;
  } else {
    throw Error(where + ": pre_tokenizer '" + type + "' is not supported");
  }
}

// bos/eos from a TemplateProcessing "single" template: special tokens before / after "$A".
void read_post_processor(Draft& draft, const Json& p, const std::string& where, int depth = 0) {
  const Json* type = member(p, "type");
  if (type == nullptr || !type->is_string()) return;
  if (*type == "Sequence") {
    if (depth >= kMaxNesting) throw Error(where + ": post_processor Sequences nest too deeply");
    if (const Json* list = member(p, "processors"); list != nullptr && list->is_array())
      for (const Json& item : *list) read_post_processor(draft, item, where, depth + 1);
    return;
  }
  if (*type != "TemplateProcessing") return;  // ByteLevel etc. add no tokens
  const Json* single = member(p, "single");
  if (single == nullptr || !single->is_array()) return;
  bool seen_sequence = false;
  for (const Json& item : *single) {
    if (member(item, "Sequence") != nullptr) {
      seen_sequence = true;
      continue;
    }
    const Json* special = member(item, "SpecialToken");
    if (special == nullptr) continue;
    const std::string name = string_member(*special, "id", where + ": post_processor");
    std::optional<int32_t> id;
    if (const Json* specials = member(p, "special_tokens")) {
      const Json* entry = member(*specials, name.c_str());
      const Json* ids = entry == nullptr ? nullptr : member(*entry, "ids");
      if (ids != nullptr && ids->is_array() && !ids->empty() && (*ids)[0].is_number_integer())
        id = (*ids)[0].get<int32_t>();
    }
    if (!seen_sequence) {
      draft.add_bos = true;
      if (id)
        draft.bos_id = id;
      else
        draft.bos_text = name;
    } else {
      draft.add_eos = true;
      if (id)
        draft.eos_id = id;
      else
        draft.eos_text = name;
    }
  }
}

void read_tokenizer_json(Draft& draft, std::string_view text, const std::string& name) {
  const Json root = parse_json(text, name);
  if (!root.is_object()) throw Error(name + ": the top level is not an object");
  const Json* model = member(root, "model");
  if (model == nullptr || !model->is_object()) throw Error(name + ": 'model' is missing");
  if (const Json* type = member(*model, "type"); type != nullptr && *type != "BPE")
    throw Error(name + ": model type " +
                (type->is_string() ? "'" + type->get<std::string>() + "'" : "(not a string)") +
                " is not supported (only BPE)");
  const Json* vocab = member(*model, "vocab");
  if (vocab == nullptr) throw Error(name + ": model.vocab is missing");
  read_vocab(draft, *vocab, name + ": model.vocab");
  draft.merges_file = name + ": model.merges";
  if (const Json* merges = member(*model, "merges")) read_merges_json(draft, *merges, name);
  draft.byte_level.ignore_merges = bool_member(*model, "ignore_merges", false, name + ": model");
  bool_member(*model, "byte_fallback", false, name + ": model");  // type check only
  if (const Json* unk = member(*model, "unk_token"); unk != nullptr && unk->is_string())
    draft.unk_text = unk->get<std::string>();

  Normalization normalization;
  if (const Json* n = member(root, "normalizer")) read_normalizer(*n, normalization, name);
  PreTokenization pre;
  if (const Json* p = member(root, "pre_tokenizer")) read_pre_tokenizer(*p, pre, name);
  if (normalization.sentencepiece || pre.metaspace) {
    draft.kind = TokenizerKind::SentencePieceBpe;
  } else {
    if (!pre.regex)
      throw Error(name + ": byte-level BPE without a pre-tokenizer regex (ByteLevel or Split)");
    draft.kind = TokenizerKind::ByteLevelBpe;
    draft.byte_level.pre_tokenizer = *pre.regex;
    draft.byte_level.nfc = normalization.nfc;
  }

  if (const Json* added = member(root, "added_tokens")) {
    if (!added->is_array()) throw Error(name + ": added_tokens is not a list");
    for (const Json& token : *added) {
      const Json* id = member(token, "id");
      if (id == nullptr || !id->is_number_integer())
        throw Error(name + ": an added token has no integer 'id'");
      add_token(draft, id->get<int64_t>(), string_member(token, "content", name + ": added token"),
                bool_member(token, "special", false, name + ": added token"), name);
    }
  }
  if (const Json* p = member(root, "post_processor")) read_post_processor(draft, *p, name);
}

// A special-token field of tokenizer_config.json: a string, {"content": …}, or null.
std::optional<std::string> special_token(const Json& config, const char* key,
                                         const std::string& where) {
  const Json* value = member(config, key);
  if (value == nullptr) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  if (value->is_object()) return string_member(*value, "content", where + ": " + key);
  throw Error(where + ": '" + key + "' is neither a string, an object with content, nor null");
}

// Returns tokenizer_class ("" when absent).
std::string read_tokenizer_config(Draft& draft, std::string_view text, const std::string& name) {
  const Json config = parse_json(text, name);
  if (!config.is_object()) throw Error(name + ": the top level is not an object");
  if (const Json* decoder = member(config, "added_tokens_decoder")) {
    if (!decoder->is_object()) throw Error(name + ": added_tokens_decoder is not an object");
    for (const auto& [key, token] : decoder->items()) {
      int64_t id = -1;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || id < 0)
        throw Error(name + ": added_tokens_decoder key '" + key + "' is not a token id");
      add_token(draft, id, string_member(token, "content", name + ": added token " + key),
                bool_member(token, "special", false, name + ": added token " + key), name);
    }
  }
  // The config names the tokens; its names override ids a post_processor gave.
  if (auto bos = special_token(config, "bos_token", name)) {
    draft.bos_text = bos;
    draft.bos_id.reset();
  }
  if (auto eos = special_token(config, "eos_token", name)) {
    draft.eos_text = eos;
    draft.eos_id.reset();
  }
  if (auto unk = special_token(config, "unk_token", name)) draft.unk_text = unk;
  if (auto pad = special_token(config, "pad_token", name)) draft.pad_text = pad;
  draft.add_bos = bool_member(config, "add_bos_token", draft.add_bos, name);
  draft.add_eos = bool_member(config, "add_eos_token", draft.add_eos, name);
  if (const Json* chat = member(config, "chat_template")) {
    if (chat->is_string()) {
      draft.chat_template = chat->get<std::string>();
    } else if (chat->is_array()) {
      for (const Json& entry : *chat)
        if (member(entry, "name") != nullptr && entry["name"] == "default")
          draft.chat_template = string_member(entry, "template", name + ": chat_template");
    } else {
      throw Error(name + ": chat_template is neither a string nor a list of {name, template}");
    }
  }
  const Json* cls = member(config, "tokenizer_class");
  return cls != nullptr && cls->is_string() ? cls->get<std::string>() : std::string();
}

void read_merges_text(Draft& draft, std::string_view text, const std::string& name) {
  size_t number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || (number == 1 && line.starts_with("#version"))) continue;
    add_merge(draft, line, number, name + " line");
  }
}

TokenType token_type(Slot slot, TokenizerKind kind, const std::string& text) {
  switch (slot) {
    case Slot::Hole:
      return TokenType::Unused;
    case Slot::AddedSpecial:
      return TokenType::Control;
    case Slot::AddedNormal:
      return TokenType::UserDefined;
    case Slot::Regular:
      break;
  }
  if (kind == TokenizerKind::SentencePieceBpe && text.size() == 6 && text.starts_with("<0x") &&
      text.back() == '>')
    return TokenType::Byte;
  return TokenType::Normal;
}

HfTokenizerFiles finish(Draft&& draft, const std::string& name) {
  HfTokenizerFiles out;
  out.kind = draft.kind;
  out.byte_level = draft.byte_level;
  out.vocab.types.reserve(draft.tokens.size());
  for (size_t id = 0; id < draft.tokens.size(); ++id)
    out.vocab.types.push_back(token_type(draft.slots[id], draft.kind, draft.tokens[id]));
  out.vocab.tokens = std::move(draft.tokens);
  out.vocab.build_index();

  // Every merge must name two tokens and produce a third, as Hugging Face requires.
  std::string joined;
  for (size_t rank = 0; rank < draft.merges.size(); ++rank) {
    const std::string& merge = draft.merges[rank];
    const size_t space = merge.find(' ');
    joined.assign(merge, 0, space).append(merge, space + 1);
    const char* missing = !out.vocab.find(std::string_view(merge).substr(0, space)) ? "left part"
                          : !out.vocab.find(std::string_view(merge).substr(space + 1))
                              ? "right part"
                          : !out.vocab.find(joined) ? "result"
                                                    : nullptr;
    if (missing != nullptr)
      throw Error(draft.merges_file + " " + std::to_string(rank + 1) + ": merge '" + merge +
                  "': its " + missing + " is not in the vocabulary");
  }
  if (draft.kind == TokenizerKind::SentencePieceBpe) {
    // Earlier merge = higher score; tokens no merge produces are never preferred.
    out.vocab.scores.assign(out.vocab.tokens.size(), -1e9f);
    std::vector<bool> scored(out.vocab.tokens.size(), false);
    for (size_t rank = 0; rank < draft.merges.size(); ++rank) {
      const std::string& merge = draft.merges[rank];
      const size_t space = merge.find(' ');
      joined.assign(merge, 0, space).append(merge, space + 1);
      const auto id = static_cast<size_t>(*out.vocab.find(joined));
      if (scored[id]) continue;
      out.vocab.scores[id] = -static_cast<float>(rank);
      scored[id] = true;
    }
  }
  out.merges = std::move(draft.merges);

  const auto resolve = [&](const std::optional<std::string>& text,
                           const char* what) -> std::optional<int32_t> {
    if (!text) return std::nullopt;
    std::optional<int32_t> id = out.vocab.find(*text);
    if (!id) throw Error(name + ": " + what + " '" + *text + "' is not in the vocabulary");
    return id;
  };
  out.bos_id = draft.bos_id ? draft.bos_id : resolve(draft.bos_text, "bos_token");
  out.eos_id = draft.eos_id ? draft.eos_id : resolve(draft.eos_text, "eos_token");
  out.unk_id = resolve(draft.unk_text, "unk_token");
  out.pad_id = resolve(draft.pad_text, "pad_token");
  for (std::optional<int32_t> id : {out.bos_id, out.eos_id})
    if (id && (*id < 0 || *id >= out.vocab.size()))
      throw Error(name + ": special token id " + std::to_string(*id) + " is out of range");
  if (out.unk_id && out.kind == TokenizerKind::SentencePieceBpe)
    out.vocab.types[static_cast<size_t>(*out.unk_id)] = TokenType::Unknown;
  out.added_tokens = std::move(draft.added);
  std::sort(out.added_tokens.begin(), out.added_tokens.end(),
            [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  out.add_bos = draft.add_bos;
  out.add_eos = draft.add_eos;
  out.chat_template = std::move(draft.chat_template);
  return out;
}

}  // namespace

PreTokenizer pre_tokenizer_from_vocabulary(const std::vector<std::string>& tokens,
                                           const std::string& name) {
  constexpr std::string_view kG = "\xC4\xA0";  // Ġ, a space byte
  size_t longest = 0;
  bool spaced = false;
  for (const std::string& token : tokens) {
    std::string_view digits = token;
    const bool has_space = digits.starts_with(kG);
    if (has_space) digits.remove_prefix(kG.size());
    if (digits.empty() ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    spaced = spaced || has_space;
    longest = std::max(longest, digits.size());
  }
  if (spaced || longest > 3) return PreTokenizer::Gpt2;
  if (longest == 3) return PreTokenizer::Llama3;
  if (longest == 1) return PreTokenizer::Qwen2;
  throw Error(name + ": cannot tell the pre-tokenizer from the vocabulary (longest digit token: " +
              std::to_string(longest) + "); add a tokenizer_config.json with tokenizer_class");
}

HfTokenizerFiles parse_tokenizer_json(std::string_view json, const std::string& name) {
  Draft draft;
  read_tokenizer_json(draft, json, name);
  return finish(std::move(draft), name);
}

HfTokenizerFiles load_hf_tokenizer_files(const std::string& dir) {
  namespace fs = std::filesystem;
  const auto path = [&](const char* file) { return (fs::path(dir) / file).string(); };
  const auto exists = [&](const char* file) { return fs::is_regular_file(path(file)); };
  Draft draft;
  bool from_tokenizer_json = false;
  if (exists("tokenizer.json")) {
    read_tokenizer_json(draft, read_text_file(path("tokenizer.json")), path("tokenizer.json"));
    from_tokenizer_json = true;
  } else {
    const char* vocab_file = exists("vocab.json")     ? "vocab.json"
                             : exists("encoder.json") ? "encoder.json"
                                                      : nullptr;
    if (vocab_file == nullptr)
      throw Error(dir +
                  ": no tokenizer.json, vocab.json + merges.txt or encoder.json + "
                  "vocab.bpe (a SentencePiece tokenizer.model is read elsewhere)");
    const char* merges_file =
        std::string_view(vocab_file) == "vocab.json" ? "merges.txt" : "vocab.bpe";
    if (!exists(merges_file))
      throw Error(dir + ": " + vocab_file + " is there but " + merges_file + " is not");
    read_vocab(draft, parse_json(read_text_file(path(vocab_file)), path(vocab_file)),
               path(vocab_file));
    draft.merges_file = path(merges_file) + " merge";
    read_merges_text(draft, read_text_file(path(merges_file)), path(merges_file));
  }

  // The regular tokens decide the fingerprint; added tokens may follow from the config.
  std::vector<std::string> regular;
  if (!from_tokenizer_json) regular = draft.tokens;
  std::string tokenizer_class;
  if (exists("tokenizer_config.json"))
    tokenizer_class = read_tokenizer_config(draft, read_text_file(path("tokenizer_config.json")),
                                            path("tokenizer_config.json"));
  if (!from_tokenizer_json) {
    // The slow tokenizers hard-code their regex; otherwise read it off the vocabulary.
    PreTokenizer pre;
    if (tokenizer_class == "Qwen2Tokenizer" || tokenizer_class == "Qwen2TokenizerFast")
      pre = PreTokenizer::Qwen2;
    else if (tokenizer_class == "GPT2Tokenizer" || tokenizer_class == "GPT2TokenizerFast")
      pre = PreTokenizer::Gpt2;
    else
      pre = pre_tokenizer_from_vocabulary(regular, dir);
    draft.byte_level = default_byte_level_options(pre);
  }
  return finish(std::move(draft), dir);
}

}  // namespace tern
