// Incremental parser of a text/event-stream (Server-Sent Events) body, as OpenAI-compatible
// servers stream completions: bytes arrive in arbitrary pieces (a network read may end inside
// a line, inside "\r\n", or inside a UTF-8 character), events come out whole.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tern::bench {

class SseParser {
 public:
  // Appends `bytes` and returns the data of every event completed by them (an event ends at a
  // blank line; its "data:" lines are joined with "\n"). Comment lines (":" first) and other
  // fields (event:, id:, retry:) are skipped. Lines may end in "\n", "\r\n" or "\r".
  std::vector<std::string> feed(std::string_view bytes);

  // The stream ended: returns the last event if the server closed without its blank line.
  std::vector<std::string> finish();

 private:
  void take_line(std::string_view line, std::vector<std::string>& events);
  void dispatch(std::vector<std::string>& events);

  std::string line_;  // the unfinished line
  std::string data_;  // data of the event being built
  bool has_data_ = false;
  bool last_was_cr_ = false;  // a "\r" ended the previous line; a "\n" right after is its pair
};

}  // namespace tern::bench
