// Reads a Hugging Face tokenizer folder into plain data: `tokenizer.json`, or `vocab.json` +
// `merges.txt` (or GPT-2's `encoder.json` + `vocab.bpe`), with `tokenizer_config.json` for
// added tokens, bos/eos and the chat template. A SentencePiece `tokenizer.model` is read by
// sentencepiece_model.h instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tern/tokenizer/byte_level_bpe.h"
#include "tern/tokenizer/vocab.h"

namespace tern {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = true;  // special tokens are skipped by decode(skip_special_tokens=true)
};

enum class TokenizerKind {
  SentencePieceBpe,  // ▁ for spaces, byte fallback, merges by score (Llama 2)
  ByteLevelBpe,      // GPT-2 byte alphabet, merges by rank (GPT-2, Llama 3, Qwen)
};

struct HfTokenizerFiles {
  TokenizerKind kind = TokenizerKind::ByteLevelBpe;
  // For SentencePiece-style tokenizer.json files `scores` are synthesised from merge ranks
  // (earlier merge = higher score), which is the order SentencePiece BPE merges in.
  Vocab vocab;                      // includes added tokens at their ids
  std::vector<std::string> merges;  // byte-level: "left right" in rank order
  ByteLevelBpeOptions byte_level;   // pre-tokenizer, nfc, ignore_merges
  std::vector<AddedToken> added_tokens;
  std::optional<int32_t> bos_id, eos_id, unk_id, pad_id;
  bool add_bos = false;
  bool add_eos = false;
  std::string chat_template;  // empty when none
};

// Throws tern::Error naming the folder and file when nothing usable is there or a file is
// malformed.
HfTokenizerFiles load_hf_tokenizer_files(const std::string& dir);

// The contents of one tokenizer.json (`name` prefixes error messages), without a
// tokenizer_config.json beside it; what load_hf_tokenizer_files and the fuzzer use.
HfTokenizerFiles parse_tokenizer_json(std::string_view json, const std::string& name);

// The pre-tokenizer a byte-level vocabulary was trained with, read from its digit tokens, for
// vocab.json + merges.txt folders that do not name a tokenizer class: the GPT-2 regex
// attaches a space to digit runs of any length (" 2018"), Llama 3's cuts digits into runs of
// at most three, Qwen2's into single digits, so the longest all-digit token (and whether one
// starts with "Ġ") tells them apart. tern::Error naming `name` when it fits none of them.
PreTokenizer pre_tokenizer_from_vocabulary(const std::vector<std::string>& tokens,
                                           const std::string& name);

}  // namespace tern
