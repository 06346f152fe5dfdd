#include "tern/server/reasoning_parser.h"

#include <algorithm>

#include "tern/server/harmony_channels.h"
#include "tern/server/partial_tag.h"

namespace tern::server {
namespace {

using std::string_view;

constexpr string_view kThinkOpen = "<think>";
constexpr string_view kThinkClose = "</think>";

bool may_become(string_view s, string_view tag) {
  return !s.empty() && s.size() < tag.size() && tag.starts_with(s);
}

// `body`: the text after an opening <think> (or the whole text for deepseek_r1 without one).
ReasoningParse split_at_close(string_view body, bool final) {
  ReasoningParse out;
  const size_t close = body.find(kThinkClose);
  if (close != string_view::npos) {
    out.reasoning = std::string(body.substr(0, close));
    out.content = std::string(body.substr(close + kThinkClose.size()));
    return out;
  }
  if (!final) body.remove_suffix(partial_tag_length(body, kThinkClose));
  out.reasoning = std::string(body);
  return out;
}

}  // namespace

std::optional<ReasoningFormat> reasoning_format_from_name(std::string_view name) {
  if (name == "qwen3") return ReasoningFormat::Qwen3;
  if (name == "deepseek_r1") return ReasoningFormat::DeepSeekR1;
  if (name == "openai_gptoss") return ReasoningFormat::GptOss;
  return std::nullopt;
}

ReasoningParse parse_reasoning(ReasoningFormat format, std::string_view text, bool final) {
  if (format == ReasoningFormat::GptOss) return parse_harmony_channels(text, final);
  if (!final && may_become(text, kThinkOpen)) return {};  // undecided
  const bool opened = text.starts_with(kThinkOpen);
  const string_view body = opened ? text.substr(kThinkOpen.size()) : text;
  if (format == ReasoningFormat::DeepSeekR1) return split_at_close(body, final);
  if (!opened) return {std::nullopt, std::string(text)};
  if (final && body.find(kThinkClose) == string_view::npos)
    return {std::nullopt, std::string(text)};
  return split_at_close(body, final);
}

}  // namespace tern::server
