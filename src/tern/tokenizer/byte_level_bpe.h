// Byte-level BPE (GPT-2, Llama 3, Qwen2/3, o200k): normalise (NFC for Qwen), split with the model's
// pre-tokenizer regex, map bytes to GPT-2's unicode alphabet, merge by rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tern/tokenizer/vocab.h"

namespace tern {

enum class PreTokenizer {
  Gpt2,    // 's|'t|… ?\p{L}+| ?\p{N}+|…
  Llama3,  // case-insensitive contractions, digits in groups of 1–3
  Qwen2,   // like Llama 3 but single digits
  O200k,   // tiktoken's o200k_base (GPT-4o, gpt-oss): case-aware words that keep contractions
};

// GGUF `tokenizer.ggml.pre` ("gpt-2", "llama-bpe", "qwen2", …) → pre-tokenizer; tern::Error
// naming the value when tern does not know it.
PreTokenizer pre_tokenizer_from_gguf(std::string_view pre);

struct ByteLevelBpeOptions {
  PreTokenizer pre_tokenizer = PreTokenizer::Gpt2;
  bool nfc = false;            // Qwen2/3 normalise to NFC first
  bool ignore_merges = false;  // Llama 3, o200k: a pre-token in the vocabulary is one token
};

// What the models of a pre-tokenizer need besides the regex, for files that do not say (GGUF,
// vocab.json + merges.txt): Qwen2 normalises to NFC, Llama 3 and o200k set ignore_merges.
ByteLevelBpeOptions default_byte_level_options(PreTokenizer pre_tokenizer);

class ByteLevelBpe {
 public:
  // `merges` are "left right" pairs in rank order (merges.txt / vocab.bpe lines, GGUF
  // tokenizer.ggml.merges). The vocabulary must outlive this object. Throws tern::Error
  // for a merge whose parts are not in the vocabulary.
  ByteLevelBpe(const Vocab& vocab, const std::vector<std::string>& merges,
               ByteLevelBpeOptions options);
  ~ByteLevelBpe();
  ByteLevelBpe(ByteLevelBpe&&) noexcept;
  ByteLevelBpe& operator=(ByteLevelBpe&&) noexcept;

  // Appends the ids of plain text (special tokens already split off) to `out`. Any bytes are
  // accepted: invalid UTF-8 is skipped by NFC and the regex and still encoded byte by byte; a
  // byte whose single-byte token the vocabulary lacks is dropped. Thread-safe.
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  // The raw bytes a token text in GPT-2's alphabet stands for ("Ġhello" → " hello").
  // Characters outside the alphabet (added tokens) are kept as their UTF-8.
  static std::string token_text_to_bytes(std::string_view token_text);
  // Bytes → GPT-2 alphabet ("\n" → "Ċ").
  static std::string bytes_to_token_text(std::string_view bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern
