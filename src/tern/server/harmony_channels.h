// gpt-oss's output in OpenAI's harmony format, split by channel for --reasoning-parser
// openai_gptoss. After the prompt's `<|start|>assistant` the model writes messages
//   <|channel|>analysis<|message|>THINKING<|end|><|start|>assistant<|channel|>final<|message|>ANSWER
// (the header of each: an optional `<|start|>` and role, `<|channel|>` and the channel name, an
// optional ` to=RECIPIENT` and ` <|constrain|>TYPE`; the body runs to `<|end|>`, `<|call|>`,
// `<|return|>` or the next header).
#pragma once

#include <string_view>

#include "tern/server/reasoning_parser.h"
#include "tern/server/tool_call_parser.h"

namespace tern::server {

// analysis (and a body without a known channel): reasoning, several joined by "\n" as vLLM does;
// final and commentary without a recipient (a tool preamble, meant for the user): content; a
// message with a recipient (a tool call): its whole text, header included, in content, where a
// tool-call parser reads it. Headers and control tags are dropped, so an output cut off before
// its final channel is all reasoning. On a prefix (`final` false) a message is read once its
// header is complete, and a possible start of a tag at the end is held back.
ReasoningParse parse_harmony_channels(std::string_view text, bool final);

// --tool-call-parser openai: the content parse_harmony_channels leaves, read for its tool calls.
// A message to `functions.NAME` is a call of NAME whose arguments are its body as written (vLLM
// passes them on unchecked too); one to another recipient (a built-in tool: browser, python) is
// neither call nor content, as vLLM answers; the text outside the messages is content. On a
// prefix a call is reported once its header is complete, with the body written so far.
ToolCallParse parse_harmony_tool_calls(std::string_view content, bool final);

}  // namespace tern::server
