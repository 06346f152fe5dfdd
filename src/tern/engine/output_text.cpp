// CompletionText: incremental detokenization, a stop-string search limited to where a match can
// newly end (so a long completion costs O(new text) per token), and streaming hold-back.
#include "tern/engine/output_text.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace tern {

CompletionText::CompletionText(Tokenizer tokenizer, const SamplingParams& params,
                               bool at_text_start)
    : detokenizer_(std::move(tokenizer), params.skip_special_tokens, at_text_start),
      include_stop_(params.include_stop_str_in_output),
      min_tokens_(params.min_tokens) {
  // validate() rejects empty stop strings; one here would match everywhere, so it is dropped.
  for (const std::string& s : params.stop)
    if (!s.empty()) stop_.push_back(s);
}

size_t CompletionText::stop_prefix_at_end() const {
  // With the stop string kept in the output, nothing streamed is ever cut: no hold-back.
  if (include_stop_) return 0;
  const std::string_view text = text_;
  size_t longest = 0;
  for (const std::string& s : stop_) {
    // A whole stop string at the end was either cut already or sits inside min_tokens, where
    // vLLM never matches it later: only proper prefixes can still grow into a match.
    for (size_t len = std::min(s.size() - 1, text.size()); len > longest; --len) {
      if (text.substr(text.size() - len) == std::string_view(s).substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

CompletionText::Update CompletionText::append(int32_t token) {
  Update update;
  if (stopped_ || finished_) return update;
  size_t search_from = text_.size();
  detokenizer_.push(token, text_);
  ++num_tokens_;
  // Text made within min_tokens is never searched again (vLLM), bar the len(stop) − 1 overlap.
  if (num_tokens_ > min_tokens_ && text_.size() > search_from) {
    size_t best = std::string::npos;
    const std::string* best_stop = nullptr;
    for (const std::string& s : stop_) {
      const size_t from = search_from >= s.size() - 1 ? search_from - (s.size() - 1) : 0;
      const size_t at = text_.find(s, from);
      if (at < best) {
        best = at;
        best_stop = &s;
      }
    }
    if (best_stop != nullptr) {
      text_.resize(include_stop_ ? best + best_stop->size() : best);
      update.stop_string = *best_stop;
      stopped_ = true;
    }
  }
  const size_t visible = stopped_ ? text_.size() : text_.size() - stop_prefix_at_end();
  if (visible > streamed_) {
    update.delta = text_.substr(streamed_, visible - streamed_);
    streamed_ = visible;
  }
  return update;
}

std::string CompletionText::finish() {
  if (finished_) return {};
  finished_ = true;
  if (!stopped_) detokenizer_.flush(text_);
  std::string rest = streamed_ < text_.size() ? text_.substr(streamed_) : std::string();
  streamed_ = text_.size();
  return rest;
}

}  // namespace tern
