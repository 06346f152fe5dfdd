#include "tern/tokenizer/incremental_detokenizer.h"

#include "tern/core/utf8.h"

namespace tern {

IncrementalDetokenizer::IncrementalDetokenizer(Tokenizer tokenizer, bool skip_special_tokens,
                                               bool at_text_start)
    : tokenizer_(std::move(tokenizer)),
      skip_special_tokens_(skip_special_tokens),
      at_text_start_(at_text_start) {
  held_.reserve(64);
}

void IncrementalDetokenizer::push(int32_t id, std::string& out) {
  tokenizer_.decode_append(id, skip_special_tokens_, at_text_start_, held_);
  size_t pos = 0;
  while (pos < held_.size()) {
    const Utf8Char c = next_utf8_char(held_, pos);
    if (c.status == Utf8Status::Incomplete) break;  // may still be completed by later tokens
    if (c.status == Utf8Status::Complete)
      out.append(held_, pos, c.length);
    else
      out.append(kReplacementChar);
    pos += c.length;
  }
  held_.erase(0, pos);
}

std::string IncrementalDetokenizer::push(int32_t id) {
  std::string out;
  push(id, out);
  return out;
}

void IncrementalDetokenizer::flush(std::string& out) {
  out += sanitize_utf8(held_);
  held_.clear();
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  flush(out);
  return out;
}

}  // namespace tern
