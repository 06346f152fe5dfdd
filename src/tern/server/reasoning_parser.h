// Reasoning in a model's output, as vLLM's --reasoning-parser splits it: the text inside
// <think>…</think> (gpt-oss: the analysis channel) becomes reasoning_content, the rest content.
// Like the tool-call parser, a pure function of the text: on a stream's prefix it returns only
// what is decided.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tern::server {

// qwen3: reasoning only when the output opens with <think> and closes it with </think>; a
// whole output without both is content (vLLM's qwen3 parser). deepseek_r1: everything before
// </think> is reasoning, with or without an opening <think>, and an output without </think>
// is all reasoning (vLLM's deepseek_r1 parser). openai_gptoss: harmony's channels
// (harmony_channels.h), which are special tokens: the server keeps them in the text it parses.
enum class ReasoningFormat { Qwen3, DeepSeekR1, GptOss };

// "qwen3" / "deepseek_r1" / "openai_gptoss"; nullopt for any other name.
std::optional<ReasoningFormat> reasoning_format_from_name(std::string_view name);

struct ReasoningParse {
  std::optional<std::string> reasoning;  // none: the output has no reasoning part
  std::string content;
};

// `final`: `text` is the whole output. Otherwise a prefix: a possible start of a tag is held
// back. (qwen3 streams an opened <think> as reasoning before it knows whether it closes, as
// vLLM's stream does; the whole output of an unclosed one is content.)
ReasoningParse parse_reasoning(ReasoningFormat format, std::string_view text, bool final);

}  // namespace tern::server
