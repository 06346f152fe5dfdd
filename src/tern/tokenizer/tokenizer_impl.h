// The state behind tern::Tokenizer, shared by tokenizer.cpp (encode/decode) and
// tokenizer_load.cpp (the loaders). Not part of the public interface.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tern/tokenizer/byte_level_bpe.h"
#include "tern/tokenizer/sentencepiece_bpe.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

// How encode finds a token in raw text before BPE.
enum class TokenMatch : uint8_t {
  Never = 0,         // produced by BPE only
  ParseSpecial = 1,  // control / special added tokens: only when parse_special
  Always = 2,        // user-defined / non-special added tokens
};

struct Tokenizer::Impl {
  // Filled by a loader, then finalize() builds everything else.
  std::string name;  // the file or folder, for error messages
  TokenizerKind kind = TokenizerKind::SentencePieceBpe;
  Vocab vocab;
  SentencePieceBpeOptions spm_options;
  std::vector<std::string> merges;  // byte-level only
  ByteLevelBpeOptions byte_level;
  std::vector<TokenMatch> match;  // per id
  std::vector<uint8_t> special;   // per id: left out by decode(skip_special_tokens)
  std::optional<int32_t> bos, eos, unk, pad;
  std::vector<int32_t> eos_ids;
  bool add_bos = false;
  bool add_eos = false;
  std::string chat_template;

  // Built by finalize(); the models point into `vocab`, so an Impl never moves after it.
  std::optional<SentencePieceBpe> spm;
  std::unique_ptr<ByteLevelBpe> byte_bpe;
  std::vector<std::string> piece_bytes;              // per id: the raw bytes decode emits
  std::array<std::vector<int32_t>, 256> candidates;  // matched tokens by first byte, longest first
  bool strip_leading_space = false;                  // SentencePiece with a dummy prefix

  // Sets `match` and `special` from the token types: control → ParseSpecial + special,
  // user-defined → Always, unknown → special. Loaders call it before their own overrides.
  void derive_token_flags();
  // Checks the special ids and builds the models and lookup tables (derive_token_flags()
  // first if the loader did not).
  void finalize();
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
};

}  // namespace tern
