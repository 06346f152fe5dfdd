// qwen3 and deepseek_r1 reasoning, whole and streamed (split at every byte).
#include "tern/server/reasoning_parser.h"

#include <gtest/gtest.h>

#include "tern/server/chat_output.h"

namespace tern::server {
namespace {

std::pair<std::string, std::string> streamed(ReasoningFormat f, const std::string& text,
                                             size_t step) {
  ChatOutputStream s({f, std::nullopt, true});
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

}  // namespace
}  // namespace tern::server
