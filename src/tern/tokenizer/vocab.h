// A tokenizer's vocabulary: token texts as the model files store them, SentencePiece scores
// and token types (GGUF's `tokenizer.ggml.token_type` values).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tern {

enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,      // <s>, </s>, <|im_start|>: never produced by BPE, matched as special text
  UserDefined = 4,  // added tokens matched before BPE
  Unused = 5,
  Byte = 6,  // SentencePiece byte-fallback pieces <0x00>..<0xFF>
};

struct Vocab {
  // Texts as stored: SentencePiece pieces use U+2581 (▁) for space; byte-level BPE tokens are
  // written in GPT-2's byte-to-unicode alphabet ("Ġ" for a space byte).
  std::vector<std::string> tokens;
  std::vector<float> scores;     // empty when the format has none
  std::vector<TokenType> types;  // same length as tokens

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  std::optional<int32_t> find(std::string_view text) const;
  // Rebuilds the text → id index; call after filling `tokens`. A duplicate text keeps the
  // lowest id.
  void build_index();

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> index_;
};

}  // namespace tern
