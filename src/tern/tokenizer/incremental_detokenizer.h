// Streaming decode: one id in, the newly finished text out. Bytes of a UTF-8 character split
// over several tokens (byte-fallback or byte-level pieces of an emoji) are held back until the
// character is complete, so every chunk is valid UTF-8.
#pragma once

#include <cstdint>
#include <string>

#include "tern/tokenizer/tokenizer.h"

namespace tern {

class IncrementalDetokenizer {
 public:
  // `at_text_start`: the first token begins the text, so SentencePiece's dummy-prefix space is
  // removed as decode() does; pass false when continuing text that was already shown (the
  // generated tokens after a prompt), where a leading space is real.
  explicit IncrementalDetokenizer(Tokenizer tokenizer, bool skip_special_tokens = true,
                                  bool at_text_start = true);

  // Appends the text `id` finishes to `out` (possibly nothing). Ill-formed bytes become U+FFFD;
  // a character still incomplete stays held. tern::Error for an id outside the vocabulary.
  void push(int32_t id, std::string& out);
  std::string push(int32_t id);

  // At the end of the stream: appends what is held, an incomplete character as U+FFFD.
  void flush(std::string& out);
  std::string flush();

  // Bytes held back (the start of an unfinished character), at most 3.
  size_t held_bytes() const { return held_.size(); }

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  bool at_text_start_;
  std::string held_;
};

}  // namespace tern
