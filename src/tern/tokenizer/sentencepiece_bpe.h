// SentencePiece-style BPE as Llama 2 uses it: spaces become U+2581 (▁) with one prepended,
// the text is split into characters, and the adjacent pair whose concatenation is the
// highest-scoring vocabulary entry is merged until none is left; characters without a piece
// fall back to <0xXX> byte pieces (or unk).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tern/tokenizer/vocab.h"

namespace tern {

inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 ▁

struct SentencePieceBpeOptions {
  bool add_dummy_prefix = true;           // "Hello" is encoded as "▁Hello"
  bool remove_extra_whitespaces = false;  // strip and collapse runs of ' ' first
  bool escape_whitespaces = true;         // ' ' → ▁
  bool byte_fallback = true;              // unknown characters → <0xXX> pieces
  std::optional<int32_t> unk_id;
};

class SentencePieceBpe {
 public:
  // `vocab` (with scores and types) must outlive this object. Throws tern::Error when the
  // vocabulary has no scores or an unknown character would have no token at all.
  SentencePieceBpe(const Vocab& vocab, SentencePieceBpeOptions options);

  // Appends the ids of plain text (special tokens already split off) to `out`. Any bytes are
  // accepted: invalid UTF-8 goes through byte fallback one byte at a time.
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  // Whitespace handling and ▁ escaping, as `encode` sees the text.
  std::string normalize(std::string_view text) const;

  const SentencePieceBpeOptions& options() const { return options_; }
  // The <0xXX> piece of a byte, or -1.
  int32_t byte_token(uint8_t byte) const { return byte_tokens_[byte]; }

 private:
  bool mergeable(int32_t id) const;

  const Vocab* vocab_;
  SentencePieceBpeOptions options_;
  std::array<int32_t, 256> byte_tokens_{};
};

// "<0x41>" → 0x41 for a byte piece's text, else nullopt.
std::optional<uint8_t> parse_byte_piece(std::string_view text);

}  // namespace tern
