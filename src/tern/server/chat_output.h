// A chat completion's text split into reasoning_content, content and tool_calls, for the whole
// response and for a stream (what each new piece of text adds to each part). Reasoning comes
// first; tool calls are parsed in the content after it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tern/server/reasoning_parser.h"
#include "tern/server/tool_call_parser.h"

namespace tern::server {

struct ChatOutputOptions {
  // tool_choice "required" / a named function: constrained decoding makes the content the
  // JSON of the calls, read by parse_required_tool_calls / parse_named_tool_call in place of
  // the --tool-call-parser.
  enum class ForcedCalls { None, Required, Named };

  std::optional<ReasoningFormat> reasoning;  // --reasoning-parser
  std::optional<ToolCallFormat> tool_calls;  // --tool-call-parser, when the request offers tools
  bool parallel_tool_calls = true;           // false: at most the first call is returned
  ForcedCalls forced_calls = ForcedCalls::None;
  std::string forced_function;  // ForcedCalls::Named: its name

  bool parses() const { return reasoning || tool_calls || forced_calls != ForcedCalls::None; }
};

struct ChatOutput {
  std::optional<std::string> reasoning;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
};

ChatOutput parse_chat_output(const ChatOutputOptions& options, std::string_view text, bool final);

// A fresh OpenAI tool call id, "call_" and 24 random letters and digits.
std::string new_tool_call_id();

struct ToolCallDelta {
  int32_t index = 0;
  bool first = false;     // the call's first delta: carries id, type and name
  std::string id, name;   // set when first
  std::string arguments;  // the next piece of the arguments' JSON ("" when first)
};

struct ChatDelta {
  std::string reasoning, content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

// One streamed choice. The deltas of a text add up to parse_chat_output(text, final) however
// the text is split, except where a stream had to send a part before the rest of the output
// changed its meaning (a call whose JSON breaks after its name was sent stays a call; a qwen3
// <think> that never closes stays reasoning).
class ChatOutputStream {
 public:
  explicit ChatOutputStream(ChatOutputOptions options) : options_(std::move(options)) {}
  ChatDelta push(std::string_view new_text, bool finished);
  bool sent_tool_calls() const { return !arguments_sent_.empty(); }

 private:
  ChatOutputOptions options_;
  std::string text_;
  std::string reasoning_sent_, content_sent_;
  std::vector<size_t> arguments_sent_;  // per call sent: bytes of its arguments sent
};

}  // namespace tern::server
