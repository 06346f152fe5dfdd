// libFuzzer target for the chat output parsers (tool calls, reasoning): any text parses without
// a crash, whole and streamed; a stream's deltas add up to the whole answer, or to the reading
// of the text as a prefix when the end changed the meaning of what was already sent; a whole
// answer's tool-call arguments are JSON (but gpt-oss's, passed on as written). The first byte
// picks the parsers and the piece size; its top bit, gpt-oss's pair (harmony channels, openai).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "tern/server/chat_output.h"

namespace {

using namespace tern::server;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "chat_output_fuzz: %s\n", what);
  std::abort();
}

struct Sum {
  std::string reasoning, content;
  std::vector<ParsedToolCall> calls;
};

bool same(const ChatOutput& a, const Sum& b) {
  if (a.reasoning.value_or("") != b.reasoning || a.content != b.content ||
      a.tool_calls.size() != b.calls.size())
    return false;
  for (size_t i = 0; i < a.tool_calls.size(); ++i)
    if (a.tool_calls[i].name != b.calls[i].name ||
        a.tool_calls[i].arguments != b.calls[i].arguments)
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t pick = data[0];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  ChatOutputOptions options;
  if (pick & 1) options.reasoning = pick & 2 ? ReasoningFormat::Qwen3 : ReasoningFormat::DeepSeekR1;
  if (pick & 4)
    options.tool_calls = pick & 8 ? ToolCallFormat::Hermes : ToolCallFormat::Llama3Json;
  else if (pick & 8)
    options.forced_calls = ChatOutputOptions::ForcedCalls::Required;
  options.parallel_tool_calls = (pick & 16) == 0;
  const size_t step = 1 + ((pick >> 5) & 3);
  if (pick & 128) {
    options.reasoning = ReasoningFormat::GptOss;
    options.tool_calls = ToolCallFormat::Openai;
    options.forced_calls = ChatOutputOptions::ForcedCalls::None;
  }

  const ChatOutput whole = parse_chat_output(options, text, true);
  for (const ParsedToolCall& call : whole.tool_calls) {
    if (call.name.empty()) die("a call without a name");
    if (options.tool_calls != ToolCallFormat::Openai && !nlohmann::json::accept(call.arguments))
      die("a call's arguments are not JSON");
  }
  ChatOutputStream stream(options);
  Sum sum;
  for (size_t i = 0; i < text.size() || i == 0; i += step) {
    const ChatDelta d = stream.push(std::string_view(text).substr(std::min(i, text.size()), step),
                                    i + step >= text.size());
    sum.reasoning += d.reasoning;
    sum.content += d.content;
    for (const ToolCallDelta& t : d.tool_calls) {
      if (t.first) {
        if (static_cast<size_t>(t.index) != sum.calls.size()) die("a call's index skips");
        sum.calls.push_back({t.name, ""});
      } else if (static_cast<size_t>(t.index) >= sum.calls.size()) {
        die("arguments before their call's header");
      }
      sum.calls[static_cast<size_t>(t.index)].arguments += t.arguments;
    }
    if (text.empty()) break;
  }
  if (!same(whole, sum) && !same(parse_chat_output(options, text, false), sum))
    die("the stream adds up to neither reading of the text");
  return 0;
}
