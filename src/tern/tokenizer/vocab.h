// A tokenizer's vocabulary: token texts as the model files store them, SentencePiece scores
// and token types (GGUF's `tokenizer.ggml.token_type` values).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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
  // Open addressing over token ids (a load of at most one half): a slot holds an id and the
  // high bits of its text's hash, which turn most probes away without reading the text. A
  // node-per-entry map made lookups the bulk of loading a 150k-token vocabulary.
  struct Slot {
    uint32_t tag = 0;
    int32_t id = -1;  // -1: empty
  };
  std::vector<Slot> index_;
};

}  // namespace tern
