// The harmony channel split: one pass over the messages, each read whole from the text so far
// (a pure function of the text, like the other output parsers, so streaming needs no state).
#include "tern/server/harmony_channels.h"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "tern/server/partial_tag.h"

namespace tern::server {
namespace {

using std::string_view;

constexpr string_view kHarmonyStart = "<|start|>";
constexpr string_view kHarmonyChannel = "<|channel|>";
constexpr string_view kHarmonyMessage = "<|message|>";
constexpr string_view kHarmonyEnd = "<|end|>";
constexpr string_view kHarmonyCall = "<|call|>";
constexpr string_view kHarmonyReturn = "<|return|>";
constexpr string_view kHarmonyConstrain = "<|constrain|>";

constexpr std::initializer_list<string_view> kHarmonyTags = {
    kHarmonyStart, kHarmonyChannel, kHarmonyMessage,  kHarmonyEnd,
    kHarmonyCall,  kHarmonyReturn,  kHarmonyConstrain};

size_t harmony_partial_tag_length(string_view text) {
  size_t longest = 0;
  for (string_view tag : kHarmonyTags) longest = std::max(longest, partial_tag_length(text, tag));
  return longest;
}

// The channel's name: the header's text after <|channel|> up to a space or a tag.
string_view channel_name(string_view header) {
  const size_t at = header.find(kHarmonyChannel);
  if (at == string_view::npos) return {};
  string_view name = header.substr(at + kHarmonyChannel.size());
  return name.substr(0, std::min(name.find(' '), name.find('<')));
}

// Where a body ends: the first tag that closes a message or opens the next one (gpt-oss may
// omit <|end|> when a renderer drops it, so a new header ends a body too).
size_t body_end(string_view text, size_t from) {
  size_t end = text.size();
  for (string_view tag :
       {kHarmonyEnd, kHarmonyCall, kHarmonyReturn, kHarmonyStart, kHarmonyChannel})
    end = std::min(end, text.find(tag, from));
  return end;
}

// The recipient a header names after "to=", up to a space or a tag ("functions.get_weather").
string_view recipient(string_view header) {
  const size_t at = header.find("to=");
  if (at == string_view::npos) return {};
  const string_view name = header.substr(at + 3);
  return name.substr(0, std::min(name.find(' '), name.find('<')));
}

size_t skip_closing_tag(string_view text, size_t at) {
  for (string_view tag : {kHarmonyEnd, kHarmonyCall, kHarmonyReturn})
    if (text.substr(at).starts_with(tag)) return at + tag.size();
  return at;
}

}  // namespace

ReasoningParse parse_harmony_channels(string_view text, bool final) {
  if (!final) text.remove_suffix(harmony_partial_tag_length(text));
  ReasoningParse out;
  std::string reasoning;
  bool has_reasoning = false;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t message_begin = pos;
    string_view header;
    if (text.substr(pos).starts_with(kHarmonyStart) ||
        text.substr(pos).starts_with(kHarmonyChannel)) {
      const size_t body_tag = text.find(kHarmonyMessage, pos);
      // An unfinished header decides nothing yet; at the end of the output it has no body.
      if (body_tag == string_view::npos) break;
      header = text.substr(pos, body_tag - pos);
      pos = body_tag + kHarmonyMessage.size();
    }
    const size_t end = body_end(text, pos);
    const string_view body = text.substr(pos, end - pos);
    const string_view channel = channel_name(header);
    if (header.empty() && body.empty()) {
      // A stray closing tag between messages carries nothing.
    } else if (header.find("to=") != string_view::npos) {
      out.content += text.substr(message_begin, end - message_begin);
    } else if (channel == "final" || channel == "commentary") {
      out.content += body;
    } else {
      if (has_reasoning) reasoning += '\n';
      reasoning += body;
      has_reasoning = true;
    }
    pos = skip_closing_tag(text, end);
  }
  if (has_reasoning) out.reasoning = std::move(reasoning);
  return out;
}

ToolCallParse parse_harmony_tool_calls(string_view content, bool final) {
  if (!final) content.remove_suffix(harmony_partial_tag_length(content));
  constexpr string_view kFunctions = "functions.";
  ToolCallParse out;
  size_t pos = 0;
  while (pos < content.size()) {
    const size_t header_begin =
        std::min(content.find(kHarmonyStart, pos), content.find(kHarmonyChannel, pos));
    out.content += content.substr(pos, header_begin - pos);
    if (header_begin == string_view::npos) break;
    const size_t body_tag = content.find(kHarmonyMessage, header_begin);
    if (body_tag == string_view::npos) break;  // the header is still being written
    const string_view to = recipient(content.substr(header_begin, body_tag - header_begin));
    const size_t body_begin = body_tag + kHarmonyMessage.size();
    const size_t end = body_end(content, body_begin);
    if (to.starts_with(kFunctions) && to.size() > kFunctions.size())
      out.calls.push_back({std::string(to.substr(kFunctions.size())),
                           std::string(content.substr(body_begin, end - body_begin))});
    pos = skip_closing_tag(content, end);
  }
  return out;
}

}  // namespace tern::server
