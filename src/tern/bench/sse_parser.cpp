// Server-Sent Events parsing after the WHATWG event-stream rules, reduced to the data field.
#include "tern/bench/sse_parser.h"

namespace tern::bench {

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> events;
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {  // the second half of a "\r\n" split across reads or not
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = (c == '\r');
    if (c == '\n' || c == '\r') {
      take_line(line_, events);
      line_.clear();
    } else {
      line_.push_back(c);
    }
  }
  return events;
}

std::vector<std::string> SseParser::finish() {
  std::vector<std::string> events;
  if (!line_.empty()) {
    take_line(line_, events);
    line_.clear();
  }
  dispatch(events);
  return events;
}

void SseParser::take_line(std::string_view line, std::vector<std::string>& events) {
  if (line.empty()) {
    dispatch(events);
    return;
  }
  if (line.front() == ':') return;  // a comment, e.g. a keep-alive ping
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  if (field != "data") return;
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

void SseParser::dispatch(std::vector<std::string>& events) {
  if (!has_data_) return;
  events.push_back(std::move(data_));
  data_.clear();
  has_data_ = false;
}

}  // namespace tern::bench
