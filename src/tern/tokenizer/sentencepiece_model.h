// Reads a SentencePiece `tokenizer.model` (a serialized sentencepiece.ModelProto) with a small
// protobuf wire-format reader of its own: pieces, trainer spec ids and normalizer options.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "tern/tokenizer/vocab.h"

namespace tern {

enum class SentencePieceModelType : int32_t {
  Unigram = 1,
  Bpe = 2,
  Word = 3,
  Char = 4,
};

struct SentencePieceModel {
  Vocab vocab;  // pieces with scores and types, index built
  SentencePieceModelType model_type = SentencePieceModelType::Unigram;  // proto2 default
  bool byte_fallback = false;
  // TrainerSpec defaults are 0, 1, 2, -1; a negative id (unused) is nullopt here.
  std::optional<int32_t> unk_id, bos_id, eos_id, pad_id;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Parses the bytes of a ModelProto. `name` (the file path) starts every error message. Only
// BPE models are accepted: any other model_type is a tern::Error, as is every malformed
// length, varint, wire type, piece type, non-UTF-8 piece or special id outside the vocabulary.
SentencePieceModel parse_sentencepiece_model(std::span<const std::byte> bytes,
                                             const std::string& name);

// Maps `path` and parses it.
SentencePieceModel read_sentencepiece_model(const std::string& path);

}  // namespace tern
