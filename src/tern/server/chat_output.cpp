#include "tern/server/chat_output.h"

#include <random>

namespace tern::server {

ChatOutput parse_chat_output(const ChatOutputOptions& options, std::string_view text, bool final) {
  ChatOutput out;
  std::string content;
  if (options.reasoning) {
    ReasoningParse r = parse_reasoning(*options.reasoning, text, final);
    out.reasoning = std::move(r.reasoning);
    content = std::move(r.content);
  } else {
    content = std::string(text);
  }
  using Forced = ChatOutputOptions::ForcedCalls;
  if (!options.tool_calls && options.forced_calls == Forced::None) {
    out.content = std::move(content);
    return out;
  }
  ToolCallParse t = options.forced_calls == Forced::Required
                        ? parse_required_tool_calls(content, final)
                    : options.forced_calls == Forced::Named
                        ? parse_named_tool_call(options.forced_function, content, final)
                        : parse_tool_calls(*options.tool_calls, content, final);
  out.content = std::move(t.content);
  out.tool_calls = std::move(t.calls);
  if (!options.parallel_tool_calls && out.tool_calls.size() > 1) out.tool_calls.resize(1);
  return out;
}

std::string new_tool_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += alphabet[rng() % 62];
  return id;
}

namespace {

// What `now` adds to `sent` (nothing when it does not extend it), and `sent` becomes `now`.
std::string growth(std::string& sent, const std::string& now) {
  if (now.size() <= sent.size() || now.compare(0, sent.size(), sent) != 0) return {};
  std::string piece = now.substr(sent.size());
  sent = now;
  return piece;
}

bool extends(const ChatOutput& now, const std::string& reasoning_sent,
             const std::string& content_sent, size_t calls_sent) {
  const std::string reasoning = now.reasoning.value_or("");
  return reasoning.starts_with(reasoning_sent) && now.content.starts_with(content_sent) &&
         now.tool_calls.size() >= calls_sent;
}

}  // namespace

ChatDelta ChatOutputStream::push(std::string_view new_text, bool finished) {
  text_ += new_text;
  ChatOutput now = parse_chat_output(options_, text_, finished);
  // The end changed the meaning of what was sent: keep to the reading the stream has sent.
  if (finished && !extends(now, reasoning_sent_, content_sent_, arguments_sent_.size()))
    now = parse_chat_output(options_, text_, false);
  ChatDelta delta;
  delta.reasoning = growth(reasoning_sent_, now.reasoning.value_or(""));
  delta.content = growth(content_sent_, now.content);
  for (size_t i = 0; i < now.tool_calls.size(); ++i) {
    const ParsedToolCall& call = now.tool_calls[i];
    const int32_t index = static_cast<int32_t>(i);
    if (i == arguments_sent_.size()) {  // OpenAI's first delta: id, type, name, arguments ""
      delta.tool_calls.push_back({index, true, new_tool_call_id(), call.name, ""});
      arguments_sent_.push_back(0);
    }
    size_t& sent = arguments_sent_[i];
    if (call.arguments.size() > sent) {
      delta.tool_calls.push_back({index, false, "", "", call.arguments.substr(sent)});
      sent = call.arguments.size();
    }
  }
  return delta;
}

}  // namespace tern::server
