// qwen3, deepseek_r1 and openai_gptoss (harmony channels) reasoning, whole and streamed (split
// at every byte).
#include "tern/server/reasoning_parser.h"

#include <gtest/gtest.h>

#include "server/chat_output_options.h"
#include "tern/server/chat_output.h"

namespace tern::server {
namespace {

std::pair<std::string, std::string> streamed(ReasoningFormat f, const std::string& text,
                                             size_t step) {
  ChatOutputStream s(testing::parsers(f, std::nullopt));
  std::string reasoning, content;
  for (size_t i = 0; i < text.size(); i += step) {
    const ChatDelta d = s.push(std::string_view(text).substr(i, step), i + step >= text.size());
    reasoning += d.reasoning;
    content += d.content;
  }
  return {reasoning, content};
}

void expect_every_split(ReasoningFormat f, const std::string& text) {
  const ReasoningParse whole = parse_reasoning(f, text, true);
  for (size_t step = 1; step <= text.size(); ++step) {
    const auto [reasoning, content] = streamed(f, text, step);
    EXPECT_EQ(reasoning, whole.reasoning.value_or("")) << "step " << step;
    EXPECT_EQ(content, whole.content) << "step " << step;
  }
}

TEST(ReasoningParser, NamesAreVllms) {
  EXPECT_EQ(reasoning_format_from_name("qwen3"), ReasoningFormat::Qwen3);
  EXPECT_EQ(reasoning_format_from_name("deepseek_r1"), ReasoningFormat::DeepSeekR1);
  EXPECT_EQ(reasoning_format_from_name("openai_gptoss"), ReasoningFormat::GptOss);
  EXPECT_FALSE(reasoning_format_from_name("granite"));
}

TEST(ReasoningParser, Qwen3SplitsThink) {
  const std::string text = "<think>\nThe user greets </thi me.\n</think>\n\nHello!";
  const ReasoningParse p = parse_reasoning(ReasoningFormat::Qwen3, text, true);
  EXPECT_EQ(p.reasoning, "\nThe user greets </thi me.\n");
  EXPECT_EQ(p.content, "\n\nHello!");
  expect_every_split(ReasoningFormat::Qwen3, text);
}

TEST(ReasoningParser, Qwen3WithoutBothTagsIsContent) {
  // enable_thinking=false: the template wrote the empty think block, the model only answers.
  for (const std::string text :
       {"Hello!", "<thin", "Hello </think> there", "<think>never closed"}) {
    const ReasoningParse p = parse_reasoning(ReasoningFormat::Qwen3, text, true);
    EXPECT_FALSE(p.reasoning) << text;
    EXPECT_EQ(p.content, text);
  }
  expect_every_split(ReasoningFormat::Qwen3, "Hello </think> there");
  expect_every_split(ReasoningFormat::Qwen3, "<thin");
}

TEST(ReasoningParser, Qwen3StreamOfAnUnclosedThinkStaysReasoning) {
  // vLLM streams an open <think> as reasoning; the end cannot take it back.
  const auto [reasoning, content] =
      streamed(ReasoningFormat::Qwen3, "<think>cut off by max_tokens", 3);
  EXPECT_EQ(reasoning, "cut off by max_tokens");
  EXPECT_EQ(content, "");
}

TEST(ReasoningParser, DeepSeekR1WithAndWithoutOpeningTag) {
  const ReasoningParse a = parse_reasoning(ReasoningFormat::DeepSeekR1, "<think>r</think>c", true);
  EXPECT_EQ(a.reasoning, "r");
  EXPECT_EQ(a.content, "c");
  const ReasoningParse b =
      parse_reasoning(ReasoningFormat::DeepSeekR1, "step 1, step 2</think>answer", true);
  EXPECT_EQ(b.reasoning, "step 1, step 2");
  EXPECT_EQ(b.content, "answer");
  const ReasoningParse c = parse_reasoning(ReasoningFormat::DeepSeekR1, "still thinking", true);
  EXPECT_EQ(c.reasoning, "still thinking");
  EXPECT_EQ(c.content, "");
  expect_every_split(ReasoningFormat::DeepSeekR1, "step 1 <, step 2</think>answer </think>");
  expect_every_split(ReasoningFormat::DeepSeekR1, "<think>r</think>c");
  expect_every_split(ReasoningFormat::DeepSeekR1, "still </thinking");
}

constexpr auto kGptOss = ReasoningFormat::GptOss;

TEST(ReasoningParser, GptOssAnalysisIsReasoningFinalIsContent) {
  // What gpt-oss writes after the prompt's "<|start|>assistant"; "<|" inside the thinking is
  // text, held back only while it could still become a tag.
  const std::string text =
      "<|channel|>analysis<|message|>The user greets <| me.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Hello!";
  const ReasoningParse p = parse_reasoning(kGptOss, text, true);
  EXPECT_EQ(p.reasoning, "The user greets <| me.");
  EXPECT_EQ(p.content, "Hello!");
  expect_every_split(kGptOss, text);
  // A renderer that drops <|end|> (llama.cpp shows only the header tags): the next header
  // ends the analysis.
  const std::string without_end =
      "<|channel|>analysis<|message|>think<|start|>assistant<|channel|>final<|message|>answer";
  const ReasoningParse q = parse_reasoning(kGptOss, without_end, true);
  EXPECT_EQ(q.reasoning, "think");
  EXPECT_EQ(q.content, "answer");
  expect_every_split(kGptOss, without_end);
}

TEST(ReasoningParser, GptOssWithoutFinalChannelIsAllReasoning) {
  for (const std::string text :
       {"<|channel|>analysis<|message|>still thinking",
        "<|channel|>analysis<|message|>still thinking<|end|><|start|>assistant<|channel|>fin",
        "still thinking"}) {
    const ReasoningParse p = parse_reasoning(kGptOss, text, true);
    EXPECT_EQ(p.reasoning, "still thinking") << text;
    EXPECT_EQ(p.content, "") << text;
    expect_every_split(kGptOss, text);
  }
  // Only a final channel: no reasoning part at all; a constrained final keeps its body only.
  const ReasoningParse f =
      parse_reasoning(kGptOss, "<|channel|>final <|constrain|>json<|message|>{\"a\": 1}", true);
  EXPECT_FALSE(f.reasoning);
  EXPECT_EQ(f.content, "{\"a\": 1}");
  expect_every_split(kGptOss, "<|channel|>final <|constrain|>json<|message|>{\"a\": 1}");
}

TEST(ReasoningParser, GptOssJoinsAnalysesAndKeepsToolCallsWhole) {
  const std::string two =
      "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b"
      "<|end|><|start|>assistant<|channel|>final<|message|>c";
  const ReasoningParse p = parse_reasoning(kGptOss, two, true);
  EXPECT_EQ(p.reasoning, "a\nb");
  EXPECT_EQ(p.content, "c");
  expect_every_split(kGptOss, two);
  // A preamble on commentary is for the user; a message to a recipient is a tool call, left
  // whole for a tool-call parser (its <|call|> ends generation and is not in the text).
  const std::string call =
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\":\"Paris\"}";
  const std::string tools =
      "<|channel|>analysis<|message|>Need the weather.<|end|>"
      "<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>" +
      call;
  const ReasoningParse t = parse_reasoning(kGptOss, tools, true);
  EXPECT_EQ(t.reasoning, "Need the weather.");
  EXPECT_EQ(t.content, "Checking." + call);
  expect_every_split(kGptOss, tools);
}

TEST(ReasoningParser, GptOssStreamHoldsBackPartialTagsAndHeaders) {
  const std::string analysis = "<|channel|>analysis<|message|>abc";
  ReasoningParse p = parse_reasoning(kGptOss, analysis + "<|en", false);
  EXPECT_EQ(p.reasoning, "abc");
  p = parse_reasoning(kGptOss, analysis + "<|end|><|start|>assistant<|channel|>fi", false);
  EXPECT_EQ(p.reasoning, "abc");  // the next message's channel is not known yet
  EXPECT_EQ(p.content, "");
  p = parse_reasoning(kGptOss, analysis + " <|x", false);
  EXPECT_EQ(p.reasoning, "abc <|x");  // no tag starts with "<|x"
  p = parse_reasoning(kGptOss, "<|chan", false);
  EXPECT_FALSE(p.reasoning);
  EXPECT_EQ(p.content, "");
}

}  // namespace
}  // namespace tern::server
