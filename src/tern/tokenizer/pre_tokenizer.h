// Splits text into pre-tokens with a byte-level BPE model's regex (GPT-2, Llama 3, Qwen2,
// o200k), the way Hugging Face's Split / ByteLevel pre-tokenizers do, using PCRE2 (UTF + UCP,
// JIT).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "tern/tokenizer/byte_level_bpe.h"

namespace tern {

// The regex exactly as tokenizer.json writes it (GPT-2's is the one the ByteLevel
// pre-tokenizer uses when `use_regex` is true).
std::string_view pre_tokenizer_pattern(PreTokenizer kind);
// The pre-tokenizer whose pattern is exactly `pattern`; nullopt for any other regex.
std::optional<PreTokenizer> pre_tokenizer_from_pattern(std::string_view pattern);

class PreTokenizerRegex {
 public:
  explicit PreTokenizerRegex(PreTokenizer kind);
  ~PreTokenizerRegex();
  PreTokenizerRegex(PreTokenizerRegex&& other) noexcept;
  PreTokenizerRegex& operator=(PreTokenizerRegex&& other) noexcept;
  PreTokenizerRegex(const PreTokenizerRegex&) = delete;
  PreTokenizerRegex& operator=(const PreTokenizerRegex&) = delete;

  // Replaces `pieces` with [begin, end) byte offsets of the pre-tokens of `text`. The pieces
  // cover the text exactly, in order. Bytes that are not valid UTF-8 never match the regex;
  // each run of them becomes a piece of its own, so any input still round-trips.
  void split(std::string_view text, std::vector<std::pair<size_t, size_t>>& pieces) const;

  PreTokenizer kind() const { return kind_; }

 private:
  PreTokenizer kind_;
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so that users need not include pcre2.h
};

}  // namespace tern
