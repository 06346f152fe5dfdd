// Hermes and Llama 3 JSON tool calls, whole and streamed (split at every byte).
#include "tern/server/tool_call_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "server/chat_output_options.h"
#include "tern/server/chat_output.h"

namespace tern::server {
namespace {

struct Streamed {
  std::string reasoning, content;
  std::vector<ParsedToolCall> calls;
  std::vector<std::string> ids;
};

// Feeds `text` in pieces of `step` bytes (0: at every byte boundary given by `cuts`).
Streamed stream(const ChatOutputOptions& options, const std::string& text, size_t step) {
  ChatOutputStream s(options);
  Streamed out;
  for (size_t i = 0; i < text.size(); i += step) {
    const bool last = i + step >= text.size();
    const ChatDelta d = s.push(std::string_view(text).substr(i, step), last);
    out.reasoning += d.reasoning;
    out.content += d.content;
    for (const ToolCallDelta& t : d.tool_calls) {
      if (t.first) {
        EXPECT_EQ(static_cast<size_t>(t.index), out.calls.size());
        out.calls.push_back({t.name, ""});
        out.ids.push_back(t.id);
      }
      EXPECT_LT(static_cast<size_t>(t.index), out.calls.size());
      out.calls.at(static_cast<size_t>(t.index)).arguments += t.arguments;
    }
  }
  return out;
}

void expect_stream_matches_whole(const ChatOutputOptions& options, const std::string& text) {
  const ChatOutput whole = parse_chat_output(options, text, true);
  for (size_t step = 1; step <= text.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const Streamed s = stream(options, text, step);
    EXPECT_EQ(s.reasoning, whole.reasoning.value_or(""));
    EXPECT_EQ(s.content, whole.content);
    ASSERT_EQ(s.calls.size(), whole.tool_calls.size());
    for (size_t i = 0; i < s.calls.size(); ++i) {
      EXPECT_EQ(s.calls[i].name, whole.tool_calls[i].name);
      EXPECT_EQ(s.calls[i].arguments, whole.tool_calls[i].arguments);
    }
  }
}

// Every split of the text into two pieces, then into single bytes.
void expect_every_split(const ChatOutputOptions& options, const std::string& text) {
  expect_stream_matches_whole(options, text);
  const ChatOutput whole = parse_chat_output(options, text, true);
  for (size_t cut = 1; cut < text.size(); ++cut) {
    ChatOutputStream s(options);
    const ChatDelta a = s.push(std::string_view(text).substr(0, cut), false);
    const ChatDelta b = s.push(std::string_view(text).substr(cut), true);
    EXPECT_EQ(a.content + b.content, whole.content) << "cut at " << cut;
  }
}

ChatOutputOptions hermes() { return testing::parsers(std::nullopt, ToolCallFormat::Hermes); }
ChatOutputOptions llama3() { return testing::parsers(std::nullopt, ToolCallFormat::Llama3Json); }

TEST(ToolCallParser, NamesAreVllms) {
  EXPECT_EQ(tool_call_format_from_name("hermes"), ToolCallFormat::Hermes);
  EXPECT_EQ(tool_call_format_from_name("llama3_json"), ToolCallFormat::Llama3Json);
  EXPECT_EQ(tool_call_format_from_name("openai"), ToolCallFormat::Openai);
  EXPECT_FALSE(tool_call_format_from_name("mistral"));
}

// gpt-oss: the harmony channels split first (reasoning, the preamble as content, the call
// message whole), then the message to functions.NAME is a call whose arguments are its body.
ChatOutputOptions gpt_oss() {
  return testing::parsers(ReasoningFormat::GptOss, ToolCallFormat::Openai);
}

TEST(ToolCallParser, OpenaiHarmonyCallAfterReasoningAndPreamble) {
  const std::string text =
      "<|channel|>analysis<|message|>Need the weather.<|end|>"
      "<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\":\"Paris\"}";
  const ChatOutput o = parse_chat_output(gpt_oss(), text, true);
  EXPECT_EQ(o.reasoning, "Need the weather.");
  EXPECT_EQ(o.content, "Checking.");
  ASSERT_EQ(o.tool_calls.size(), 1u);
  EXPECT_EQ(o.tool_calls[0].name, "get_weather");
  EXPECT_EQ(o.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
  expect_every_split(gpt_oss(), text);
  // The recipient may stand in the role's place, before the channel (how the chat template
  // renders a past call), and a call may follow a call.
  const std::string two =
      "<|channel|>analysis<|message|>Two.<|end|>"
      "<|start|>assistant to=functions.a<|channel|>commentary json<|message|>{}<|call|>"
      "<|start|>assistant to=functions.b<|channel|>commentary json<|message|>{\"x\": [1]}";
  const ChatOutput t = parse_chat_output(gpt_oss(), two, true);
  EXPECT_EQ(t.content, "");
  ASSERT_EQ(t.tool_calls.size(), 2u);
  EXPECT_EQ(t.tool_calls[0].name, "a");
  EXPECT_EQ(t.tool_calls[0].arguments, "{}");
  EXPECT_EQ(t.tool_calls[1].name, "b");
  EXPECT_EQ(t.tool_calls[1].arguments, "{\"x\": [1]}");
  expect_every_split(gpt_oss(), two);
}

TEST(ToolCallParser, OpenaiOtherRecipientsAndPlainAnswers) {
  // A built-in tool's call (browser, python) is neither a call nor content, as vLLM answers.
  const std::string builtin =
      "<|channel|>analysis<|message|>Search.<|end|>"
      "<|start|>assistant<|channel|>analysis to=browser.search code<|message|>{\"query\":\"x\"}";
  const ChatOutput b = parse_chat_output(gpt_oss(), builtin, true);
  EXPECT_EQ(b.reasoning, "Search.");
  EXPECT_EQ(b.content, "");
  EXPECT_TRUE(b.tool_calls.empty());
  expect_every_split(gpt_oss(), builtin);
  // No call: the final channel is the content, "<|" in it stays text.
  const std::string answer =
      "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>1 <| 2";
  const ChatOutput a = parse_chat_output(gpt_oss(), answer, true);
  EXPECT_EQ(a.content, "1 <| 2");
  EXPECT_TRUE(a.tool_calls.empty());
  expect_every_split(gpt_oss(), answer);
  // A stream names the call once its header is whole, and sends the body as it comes.
  const std::string head = "<|channel|>commentary to=functions.get_weather <|constrain|>json";
  EXPECT_TRUE(parse_tool_calls(ToolCallFormat::Openai, head, false).calls.empty());
  const ToolCallParse p =
      parse_tool_calls(ToolCallFormat::Openai, head + "<|message|>{\"ci<|", false);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, "{\"ci");
}

TEST(ToolCallParser, HermesContentBeforeTwoCalls) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
      "\"arguments\": {\"tz\": \"Europe/Paris\"}}\n</tool_call>";
  const ToolCallParse p = parse_tool_calls(ToolCallFormat::Hermes, text, true);
  EXPECT_EQ(p.content, "Let me check.\n");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments),
            nlohmann::json({{"city", "Paris"}, {"unit", "c"}}));
  EXPECT_EQ(p.calls[1].name, "get_time");
  EXPECT_EQ(p.calls[1].arguments, "{\"tz\": \"Europe/Paris\"}");
  expect_every_split(hermes(), text);
}

TEST(ToolCallParser, HermesNoCallIsContent) {
  const std::string text = "No tools needed: 2 < 3 and <b>bold</b> <tool";
  const ToolCallParse p = parse_tool_calls(ToolCallFormat::Hermes, text, true);
  EXPECT_EQ(p.content, text);
  EXPECT_TRUE(p.calls.empty());
  // A prefix holds back what may still become "<tool_call>".
  EXPECT_EQ(parse_tool_calls(ToolCallFormat::Hermes, text, false).content,
            "No tools needed: 2 < 3 and <b>bold</b> ");
  expect_every_split(hermes(), text);
}

TEST(ToolCallParser, HermesMalformedCallIsContent) {
  // The arguments' object is never closed: vLLM answers the whole text as content.
  const std::string text =
      "Sure.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}\n</tool_call>";
  const ToolCallParse p = parse_tool_calls(ToolCallFormat::Hermes, text, true);
  EXPECT_EQ(p.content, text);
  EXPECT_TRUE(p.calls.empty());
  // No name, and a name that is not a string: content too.
  for (const std::string bad :
       {"<tool_call>{\"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"f\"}</tool_call>", "<tool_call>not json</tool_call>"}) {
    const ToolCallParse q = parse_tool_calls(ToolCallFormat::Hermes, bad, true);
    EXPECT_EQ(q.content, bad);
    EXPECT_TRUE(q.calls.empty()) << bad;
  }
  // Without a complete name nothing was streamed as a call, so the stream agrees.
  expect_every_split(hermes(), "<tool_call>not json</tool_call>");
  expect_every_split(hermes(), "<tool_call>{\"arguments\": {}}</tool_call>");
  // Streamed, the call was sent once its name was complete: the stream cannot take it back
  // (a documented limit; vLLM's stream does the same).
  ChatOutputStream s(hermes());
  s.push(text.substr(0, 30), false);
  s.push(text.substr(30), true);
  EXPECT_TRUE(s.sent_tool_calls());
}

TEST(ToolCallParser, HermesUnclosedFinalCallParses) {
  // The model stopped (EOS) before writing </tool_call>: vLLM's regex takes it still.
  const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"a}\\\"b\"}}";
  const ToolCallParse p = parse_tool_calls(ToolCallFormat::Hermes, text, true);
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments)["q"], "a}\"b");
  expect_every_split(hermes(), text);
}

TEST(ToolCallParser, HermesStreamSendsArgumentsAsTheyCome) {
  ChatOutputStream s(hermes());
  EXPECT_EQ(s.push("Hi <tool_", false).content, "Hi ");
  ChatDelta d = s.push("call>\n{\"name\": \"get_w", false);
  EXPECT_TRUE(d.tool_calls.empty());  // the name is not complete
  d = s.push("eather\", \"arguments\": {\"ci", false);
  // OpenAI's shape: the call's first delta has its id, name and empty arguments.
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_TRUE(d.tool_calls[0].first);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(d.tool_calls[0].arguments, "");
  EXPECT_FALSE(d.tool_calls[1].first);
  EXPECT_EQ(d.tool_calls[1].index, 0);
  EXPECT_EQ(d.tool_calls[1].arguments, "{\"ci");
  d = s.push("ty\": \"Paris\"}}\n</tool_call>", true);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_FALSE(d.tool_calls[0].first);
  EXPECT_EQ(d.tool_calls[0].arguments, "ty\": \"Paris\"}");
  EXPECT_TRUE(s.sent_tool_calls());
}

TEST(ToolCallParser, ParallelToolCallsFalseKeepsTheFirst) {
  const std::string text =
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", "
      "\"arguments\": {}}</tool_call>";
  ChatOutputOptions one = hermes();
  one.parallel_tool_calls = false;
  const ChatOutput o = parse_chat_output(one, text, true);
  ASSERT_EQ(o.tool_calls.size(), 1u);
  EXPECT_EQ(o.tool_calls[0].name, "a");
  expect_every_split(one, text);
}

TEST(ToolCallParser, IdsAreUnique) {
  const std::string a = new_tool_call_id(), b = new_tool_call_id();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), 29u);
}

TEST(ToolCallParser, Llama3JsonCalls) {
  const std::string text =
      "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; "
      "{\"name\": \"get_time\", \"arguments\": {}}";
  const ToolCallParse p = parse_tool_calls(ToolCallFormat::Llama3Json, text, true);
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(p.calls[1].name, "get_time");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  expect_every_split(llama3(), text);
  const std::string bare = "{\"name\": \"f\", \"parameters\": {\"x\": [1, 2.5e3, true, null]}}";
  ASSERT_EQ(parse_tool_calls(ToolCallFormat::Llama3Json, bare, true).calls.size(), 1u);
  expect_every_split(llama3(), bare);
}

TEST(ToolCallParser, Llama3JsonTextAndMalformedAreContent) {
  for (const std::string text :
       {"The weather is fine.", "{\"name\": \"f\", \"parameters\": {\"x\": }}",
        "{\"name\": \"f\", \"parameters\": {}} and more", "<|python_tag|>",
        "{\"city\": \"Paris\"}"}) {
    const ToolCallParse p = parse_tool_calls(ToolCallFormat::Llama3Json, text, true);
    EXPECT_EQ(p.content, text);
    EXPECT_TRUE(p.calls.empty()) << text;
  }
  for (const std::string text : {"The weather is fine.", "<|python_tag|>", "{\"city\": \"Paris\"}"})
    expect_every_split(llama3(), text);
}

bool same(const ChatOutput& a, const Streamed& b) {
  if (a.reasoning.value_or("") != b.reasoning || a.content != b.content ||
      a.tool_calls.size() != b.calls.size())
    return false;
  for (size_t i = 0; i < a.tool_calls.size(); ++i)
    if (a.tool_calls[i].name != b.calls[i].name ||
        a.tool_calls[i].arguments != b.calls[i].arguments)
      return false;
  return true;
}

// Texts glued from the formats' pieces, fed in random pieces: the stream adds up to the whole
// answer, or (when the end changed the meaning of what was sent) to the reading it had sent.
TEST(ToolCallParser, RandomTextsStreamAsTheyParse) {
  const std::vector<std::string> parts = {"<tool_call>",
                                          "</tool_call>",
                                          "<tool_",
                                          "</tool",
                                          "<think>",
                                          "</think>",
                                          "<|python_tag|>",
                                          "{",
                                          "}",
                                          "[",
                                          "]",
                                          "\"name\"",
                                          "\"arguments\"",
                                          "\"parameters\"",
                                          ": ",
                                          ":",
                                          ", ",
                                          ";",
                                          "\"f\"",
                                          "\"a\\\"b\"",
                                          "1",
                                          "-2.5e3",
                                          "true",
                                          "null",
                                          "x",
                                          " ",
                                          "\n",
                                          "<",
                                          "é"};
  std::mt19937 rng(17);
  int agreed = 0, calls = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) text += parts[rng() % parts.size()];
    const ReasoningFormat reasoning =
        rng() % 2 ? ReasoningFormat::Qwen3 : ReasoningFormat::DeepSeekR1;
    const ToolCallFormat tool_calls =
        rng() % 2 ? ToolCallFormat::Hermes : ToolCallFormat::Llama3Json;
    const bool parallel = rng() % 4 != 0;
    ChatOutputOptions options = testing::parsers(reasoning, tool_calls, parallel);
    if (rng() % 3 == 0) {  // tool_choice "required": the calls are a JSON array
      options.tool_calls.reset();
      options.forced_calls = ChatOutputOptions::ForcedCalls::Required;
    }
    if (rng() % 3 == 0)  // a well-formed call somewhere, so calls are not rare
      text.insert(
          rng() % 2 ? 0 : text.size(),
          options.tool_calls
              ? "<tool_call>{\"name\": \"f\", \"arguments\": {\"k\": [1, \"v\"]}}</tool_call>"
              : "[{\"name\": \"f\", \"parameters\": {\"k\": [1, \"v\"]}}]");
    const size_t step = 1 + rng() % 7;
    const Streamed s = stream(options, text, step);
    const ChatOutput whole = parse_chat_output(options, text, true);
    if (same(whole, s)) {
      ++agreed;
      calls += !whole.tool_calls.empty();
      continue;
    }
    EXPECT_TRUE(same(parse_chat_output(options, text, false), s)) << text << " step " << step;
  }
  EXPECT_GT(agreed, 2000);
  EXPECT_GT(calls, 100);
}

// The inputs chat_output_fuzz found (fuzz/seeds/chat_output_fuzz/regression_*), read as the
// fuzzer reads them: the first byte picks the parsers and the piece size.
TEST(ToolCallParser, FuzzRegressionsStreamAsTheyParse) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(TERN_SOURCE_DIR) +
                                                               "/fuzz/seeds/chat_output_fuzz")) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.empty()) continue;
    const auto pick = static_cast<uint8_t>(bytes[0]);
    const std::string text = bytes.substr(1);
    ChatOutputOptions options;
    if (pick & 1)
      options.reasoning = pick & 2 ? ReasoningFormat::Qwen3 : ReasoningFormat::DeepSeekR1;
    if (pick & 4)
      options.tool_calls = pick & 8 ? ToolCallFormat::Hermes : ToolCallFormat::Llama3Json;
    else if (pick & 8)
      options.forced_calls = ChatOutputOptions::ForcedCalls::Required;
    options.parallel_tool_calls = (pick & 16) == 0;
    if (pick & 128) {
      options.reasoning = ReasoningFormat::GptOss;
      options.tool_calls = ToolCallFormat::Openai;
      options.forced_calls = ChatOutputOptions::ForcedCalls::None;
    }
    const Streamed st = stream(options, text, 1 + ((pick >> 5) & 3));
    EXPECT_TRUE(same(parse_chat_output(options, text, true), st) ||
                same(parse_chat_output(options, text, false), st))
        << entry.path();
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

ChatOutputOptions forced(ChatOutputOptions::ForcedCalls how, std::string function = "") {
  ChatOutputOptions o;
  o.forced_calls = how;
  o.forced_function = std::move(function);
  return o;
}

TEST(ForcedToolCalls, RequiredArrayIsReadAsCalls) {
  const ChatOutputOptions required = forced(ChatOutputOptions::ForcedCalls::Required);
  const std::string text =
      "[{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}, "
      "{\"name\":\"get_time\",\"parameters\":{\"tz\":\"a]}\\\"\"}}]";
  const ChatOutput o = parse_chat_output(required, text, true);
  EXPECT_EQ(o.content, "");
  ASSERT_EQ(o.tool_calls.size(), 2u);
  EXPECT_EQ(o.tool_calls[0].name, "get_weather");
  EXPECT_EQ(o.tool_calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(o.tool_calls[1].name, "get_time");
  EXPECT_EQ(nlohmann::json::parse(o.tool_calls[1].arguments)["tz"], "a]}\"");
  expect_every_split(required, text);
  // parallel_tool_calls false keeps the first (the schema allows one; this is the backstop).
  ChatOutputOptions one = required;
  one.parallel_tool_calls = false;
  EXPECT_EQ(parse_chat_output(one, text, true).tool_calls.size(), 1u);
}

TEST(ForcedToolCalls, RequiredTextThatIsNoListOfCallsIsContent) {
  const ChatOutputOptions required = forced(ChatOutputOptions::ForcedCalls::Required);
  // Cut off by max_tokens, not an array, a call without parameters, text after the array.
  for (const std::string text :
       {"[{\"name\": \"f\", \"parameters\": {\"a\": 1}", "{\"name\": \"f\"}", "[{\"name\": \"f\"}]",
        "[{\"name\": \"f\", \"parameters\": {}}] x", "", "[]"}) {
    const ChatOutput o = parse_chat_output(required, text, true);
    EXPECT_EQ(o.content, text);
    EXPECT_TRUE(o.tool_calls.empty()) << text;
  }
  // A stream reports the call from its name on, arguments as they come.
  const ChatOutput prefix =
      parse_chat_output(required, "[{\"name\": \"f\", \"parameters\": {\"a\": [1", false);
  ASSERT_EQ(prefix.tool_calls.size(), 1u);
  EXPECT_EQ(prefix.tool_calls[0].arguments, "{\"a\": [1");
  EXPECT_EQ(prefix.content, "");
}

TEST(ForcedToolCalls, NamedFunctionTextIsItsArguments) {
  const ChatOutputOptions named = forced(ChatOutputOptions::ForcedCalls::Named, "get_weather");
  const std::string text = "{\"city\": \"Paris\", \"days\": [1, 2]}";
  const ChatOutput o = parse_chat_output(named, text, true);
  EXPECT_EQ(o.content, "");
  ASSERT_EQ(o.tool_calls.size(), 1u);
  EXPECT_EQ(o.tool_calls[0].name, "get_weather");
  EXPECT_EQ(o.tool_calls[0].arguments, text);
  expect_every_split(named, text);
  // After the reasoning: the content is the arguments.
  ChatOutputOptions thinking = named;
  thinking.reasoning = ReasoningFormat::DeepSeekR1;
  const std::string with_thoughts = "Paris, then.</think>" + text;
  const ChatOutput t = parse_chat_output(thinking, with_thoughts, true);
  EXPECT_EQ(t.reasoning, "Paris, then.");
  ASSERT_EQ(t.tool_calls.size(), 1u);
  EXPECT_EQ(t.tool_calls[0].arguments, text);
  expect_every_split(thinking, with_thoughts);
}

TEST(ReasoningThenToolCalls, ToolCallsAreReadAfterTheReasoning) {
  const ChatOutputOptions options =
      testing::parsers(ReasoningFormat::Qwen3, ToolCallFormat::Hermes);
  const std::string text =
      "<think>\nI could call <tool_call> here.\n</think>\n\n<tool_call>\n{\"name\": \"f\", "
      "\"arguments\": {\"a\": \"b\"}}\n</tool_call>";
  const ChatOutput o = parse_chat_output(options, text, true);
  EXPECT_EQ(o.reasoning, "\nI could call <tool_call> here.\n");
  EXPECT_EQ(o.content, "\n\n");
  ASSERT_EQ(o.tool_calls.size(), 1u);
  EXPECT_EQ(o.tool_calls[0].arguments, "{\"a\": \"b\"}");
  expect_every_split(options, text);
}

}  // namespace
}  // namespace tern::server
