// One completion's detokenized text with vLLM's stop-string semantics: the text is cut at the
// first stop string (before it, or after it with include_stop_str_in_output), and while
// streaming, text that could still turn into a stop string is held back, so a client never sees
// a piece of text that a later token cuts away.
//
// Which tokens to append (vLLM v1's rule): every generated token, except the one that ends the
// completion by id (an EOS id or one of stop_token_ids), whose text is left out unless
// include_stop_str_in_output. The token that completes a stop string is appended (it stays in
// the completion's token ids too); after a stop string, append nothing more.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tern/sampling/sampling_params.h"
#include "tern/tokenizer/incremental_detokenizer.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

class CompletionText {
 public:
  // Generated text continues the prompt, so a leading space is real; unless the prompt shows
  // no text (BOS alone), where the text starts here (`at_text_start`, as decode() would).
  CompletionText(Tokenizer tokenizer, const SamplingParams& params, bool at_text_start = false);

  struct Update {
    std::string delta;                       // text to stream now (may be empty)
    std::optional<std::string> stop_string;  // set when a stop string ended the completion
  };

  // Adds a generated token's text. A stop string is searched where it could newly end: in the
  // added text and the len(stop) − 1 bytes before it, and only once more than min_tokens tokens
  // were appended (vLLM). Several matching: the one that starts first (then the first listed),
  // so the text kept never contains a stop string. Without include_stop_str_in_output, `delta`
  // holds back the longest end of the text that is the start of a stop string (at most the
  // longest stop's length − 1 bytes, always whole characters). After a stop: returns nothing.
  Update append(int32_t token);

  // At the end (length, EOS or a stop id): the held-back text and the detokenizer's flush (an
  // unfinished character as U+FFFD). Empty after a stop string.
  std::string finish();

  const std::string& text() const { return text_; }  // all text so far
  bool stopped() const { return stopped_; }          // a stop string was found

 private:
  // Bytes at the end of text_ that may begin a stop string still.
  size_t stop_prefix_at_end() const;

  IncrementalDetokenizer detokenizer_;
  std::vector<std::string> stop_;
  bool include_stop_;
  int32_t min_tokens_;
  int32_t num_tokens_ = 0;
  std::string text_;
  size_t streamed_ = 0;  // bytes of text_ already returned in a delta
  bool stopped_ = false;
  bool finished_ = false;
};

}  // namespace tern
