// Fuzzes the SentencePiece tokenizer.model reader; a model that parses is also built into a
// Tokenizer and run through encode, decode and the incremental detokenizer.
#include <cstddef>
#include <cstdint>
#include <span>

#include "tern/core/error.h"
#include "tern/tokenizer/incremental_detokenizer.h"
#include "tern/tokenizer/sentencepiece_model.h"
#include "tern/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tern::SentencePieceModel model = tern::parse_sentencepiece_model(
        std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz.model");
    const tern::Tokenizer tok = tern::Tokenizer::from_sentencepiece(std::move(model));
    const auto ids = tok.encode("Once upon a time  <s>\xF0\x9F\xA6\x99 w\xC3\xB6rld\xFF </s>");
    const std::string text = tok.decode(ids, /*skip_special_tokens=*/false);
    tern::IncrementalDetokenizer detok(tok, false);
    std::string streamed;
    for (int32_t id : ids) detok.push(id, streamed);
    detok.flush(streamed);
    (void)text;
  } catch (const tern::Error&) {
  }
  return 0;
}
