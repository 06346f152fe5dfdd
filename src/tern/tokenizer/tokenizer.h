// The one tokenizer entry point of tern: loads a tokenizer from a GGUF file, a Hugging Face
// folder or a SentencePiece tokenizer.model, and encodes/decodes with its special tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/tokenizer/hf_tokenizer_files.h"
#include "tern/tokenizer/sentencepiece_model.h"
#include "tern/tokenizer/vocab.h"

namespace tern {

class GgufFile;
class GgufWriter;

// Immutable after loading and cheap to copy (copies share one state), so the engine, the
// server and every incremental detokenizer can hold their own.
class Tokenizer {
 public:
  // `path` is a .gguf file; a folder with tokenizer.json, vocab.json (+ merges.txt) or
  // encoder.json (+ vocab.bpe); a folder with only tokenizer.model; or a .model file. A
  // tokenizer_config.json beside a tokenizer.model adds its added tokens, add_bos/add_eos and
  // chat template. Throws tern::Error naming the path when nothing usable is there.
  static Tokenizer load(const std::string& path);
  // tokenizer.ggml.model "llama" (SentencePiece BPE) or "gpt2" (byte-level BPE).
  static Tokenizer from_gguf(const GgufFile& gguf);
  // `config_json` is the text of a tokenizer_config.json (empty for none); `name` is used in
  // error messages.
  static Tokenizer from_sentencepiece(SentencePieceModel model, std::string_view config_json = {},
                                      const std::string& name = "tokenizer.model");
  static Tokenizer from_hf_files(HfTokenizerFiles files, const std::string& name = "tokenizer");

  // Special and added tokens are found in the raw text first (the longest one at each
  // position): tokens the model marks as user-defined / non-special added tokens always,
  // control / special tokens only when `parse_special`. The text between them goes through the
  // BPE model. `add_special_tokens` adds bos/eos as the tokenizer's add_bos/add_eos say.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true,
                              bool parse_special = true) const;

  // The bytes of the text (not sanitised: ids that split a UTF-8 character give invalid
  // UTF-8, as the model produced it). SentencePiece: ▁ → space, <0xXX> → the byte, and the
  // dummy-prefix space is removed at the start of the text and after a special token shown
  // with skip_special_tokens=false, mirroring where encode adds it. Throws tern::Error for an
  // id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = true) const;

  // One step of decode for streaming: appends the bytes of `id` to `out`. `at_text_start` is
  // the decode state (true before the first token); decode(ids) is this over every id.
  void decode_append(int32_t id, bool skip_special_tokens, bool& at_text_start,
                     std::string& out) const;

  // The raw bytes one token stands for (special tokens: their text). tern::Error if out of range.
  const std::string& token_bytes(int32_t id) const;

  TokenizerKind kind() const;
  const Vocab& vocab() const;
  int32_t vocab_size() const { return vocab().size(); }
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> unk_id() const;
  std::optional<int32_t> pad_id() const;
  // Tokens that end generation: eos plus end-of-turn / end-of-message tokens when the model
  // names them (GGUF eot/eom ids), without duplicates.
  const std::vector<int32_t>& eos_ids() const;
  bool add_bos() const;
  bool add_eos() const;
  // Control and unknown tokens, and Hugging Face added tokens marked special: what
  // decode(skip_special_tokens=true) leaves out.
  bool is_special(int32_t id) const;
  const std::string& chat_template() const;  // empty when the model has none

  // Writes the tokenizer.* keys llama.cpp reads (model, pre, tokens, scores, token_type,
  // merges, special ids, add_bos/add_eos, chat_template), so from_gguf reads it back.
  // `model_vocab_size` is the rows of the model's embedding: llama.cpp requires one token per
  // row, so a shorter vocabulary (Qwen's 151,669 tokens for 151,936 rows) is padded with
  // unused "[PAD<id>]" tokens, as its converter does. Throws tern::Error when the tokenizer has
  // more tokens than the model has rows.
  void write_gguf(GgufWriter& writer, int64_t model_vocab_size = 0) const;

  // The loaded state, defined in tokenizer_impl.h (opaque to users).
  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace tern
