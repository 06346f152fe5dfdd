// Tool calls in a model's output text, in the formats vLLM's --tool-call-parser names: hermes
// (Qwen2.5/Qwen3: <tool_call>{"name": …, "arguments": …}</tool_call> blocks) and llama3_json
// ({"name": …, "parameters": …} objects, after an optional <|python_tag|>, joined by ';') and
// openai (gpt-oss's harmony messages to functions.NAME, harmony_channels.h).
// One pure function of the text serves both the whole output and a stream: on a prefix it
// returns only what is decided, so that a stream can send the growth of each part.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern::server {

enum class ToolCallFormat { Hermes, Llama3Json, Openai };

// "hermes" / "llama3_json" / "openai"; nullopt for any other name.
std::optional<ToolCallFormat> tool_call_format_from_name(std::string_view name);

struct ParsedToolCall {
  std::string name;
  // The arguments' JSON as the model wrote it (a prefix of it while the call is open).
  std::string arguments;
};

struct ToolCallParse {
  std::string content;  // the text outside the calls
  std::vector<ParsedToolCall> calls;
};

// `final`: `text` is the whole output. Then a call that does not parse (bad JSON, no name, no
// arguments) makes the whole text content, as vLLM answers. Otherwise `text` is a prefix:
// text that may still become a call marker is held back, and a call is reported once its name
// is complete, with the arguments written so far.
ToolCallParse parse_tool_calls(ToolCallFormat format, std::string_view text, bool final);

// What tool_choice "required" and a named function make a model write under constrained
// decoding (vLLM's forms), read with the same contract as parse_tool_calls:
// "required": a JSON array of {"name": …, "parameters": …} objects, each a call whose arguments
// are its "parameters" value; a final text that is not such an array is content.
ToolCallParse parse_required_tool_calls(std::string_view text, bool final);
// A named function: the text is the call's arguments object itself, reported from its first
// byte on (a final text cut short stays the call, as vLLM answers it; an empty one is none).
ToolCallParse parse_named_tool_call(std::string_view name, std::string_view text, bool final);

}  // namespace tern::server
