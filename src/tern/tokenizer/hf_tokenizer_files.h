// Reads a Hugging Face tokenizer folder into plain data: `tokenizer.json`, or `vocab.json` +
// `merges.txt` (or GPT-2's `encoder.json` + `vocab.bpe`), with `tokenizer_config.json` for
// added tokens, bos/eos and the chat template. A SentencePiece `tokenizer.model` is read by
// sentencepiece_model.h instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
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

}  // namespace tern
