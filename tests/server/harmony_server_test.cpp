// --reasoning-parser openai_gptoss through tern serve's HTTP routes: harmony's channel tags are
// special tokens, so a scripted model that writes them as such must still have its analysis
// channel answered as reasoning_content and its final channel as content, whole and streamed.
#include <gtest/gtest.h>

#include <algorithm>

#include "server/server_test_util.h"
#include "shared_tokenizer.h"
#include "tern/server/openai_protocol.h"
#include "tern/tokenizer/chat_template.h"
#include "tern/tokenizer/hf_tokenizer_files.h"

namespace tern::testing {
namespace {

// The Qwen tokenizer with harmony's tags as special tokens in the embedding rows it leaves
// unused. <|channel|> and <|message|> get two ids each: scripted_qwen3 needs the tokens of its
// chain distinct, and the answer writes each tag twice (both ids decode to the tag).
struct HarmonyIds {
  int32_t channel[2], message[2], start, end;
};

struct HarmonyTokens {
  HarmonyIds ids;
  Tokenizer tokenizer;
};

HarmonyTokens harmony_tokenizer() {
  HfTokenizerFiles files = load_hf_tokenizer_files(fixture("qwen-tokenizer"));
  const auto add = [&](const std::string& tag) {
    const int32_t id = files.vocab.size();
    files.vocab.tokens.push_back(tag);
    files.vocab.types.push_back(TokenType::Control);
    files.added_tokens.push_back({id, tag, /*special=*/true});
    return id;
  };
  HarmonyIds ids{};
  ids.channel[0] = add("<|channel|>");
  ids.channel[1] = add("<|channel|>");
  ids.message[0] = add("<|message|>");
  ids.message[1] = add("<|message|>");
  ids.start = add("<|start|>");
  ids.end = add("<|end|>");
  files.vocab.build_index();
  return {ids, Tokenizer::from_hf_files(std::move(files), "qwen + harmony tags")};
}

std::vector<int32_t> text_tokens(const Tokenizer& tok, const std::string& text) {
  return tok.encode(text, false, /*parse_special=*/false);
}

// "<|channel|>analysis<|message|>ok<|end|><|start|>assistant<|channel|>final<|message|>Hi there"
// after the Qwen template's generation prompt, then end of sequence.
std::vector<int32_t> harmony_chain(const HarmonyTokens& harmony) {
  const Tokenizer& tok = harmony.tokenizer;
  const HarmonyIds& h = harmony.ids;
  std::vector<int32_t> chain = {tok.encode("<|im_start|>assistant\n", false, true).back()};
  const auto append = [&](std::vector<int32_t> ids) {
    chain.insert(chain.end(), ids.begin(), ids.end());
  };
  append({h.channel[0]});
  append(text_tokens(tok, "analysis"));
  append({h.message[0]});
  append(text_tokens(tok, "ok"));
  append({h.end, h.start});
  append(text_tokens(tok, "assistant"));
  append({h.channel[1]});
  append(text_tokens(tok, "final"));
  append({h.message[1]});
  append(text_tokens(tok, "Hi there"));
  chain.push_back(*tok.eos_id());
  return chain;
}

TEST(HarmonyServer, AnalysisChannelIsReasoningContent) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  const HarmonyTokens h = harmony_tokenizer();
  const std::vector<int32_t> chain = harmony_chain(h);
  std::vector<int32_t> sorted = chain;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end())
      << "the scripted chain repeats a token";
  LoadedModel model = scripted_qwen3(chain);
  ASSERT_LT(h.tokenizer.vocab_size(), model.config.vocab_size);
  model.tokenizer = h.tokenizer;
  server::ServerOptions o;
  o.reasoning_parser = "openai_gptoss";
  TestServer s(std::move(model), server_engine(1024), o);
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
               {"max_tokens", 30},
               {"temperature", 0}};
  const HttpResult r = post(s.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = r.body_json();
  const json& m = answer["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], "ok") << r.body;
  EXPECT_EQ(m["content"], "Hi there") << r.body;
  body["stream"] = true;
  const StreamResult st = stream(s.port(), "/v1/chat/completions", body);
  ASSERT_EQ(st.status, 200) << st.error_body;
  const StreamedChat streamed = streamed_chat(st);
  EXPECT_EQ(streamed.reasoning, "ok");
  EXPECT_EQ(streamed.content, "Hi there");
  // Completions keep skipping special tokens: the tags vanish from the text.
  const HttpResult c =
      post(s.port(), "/v1/completions",
           {{"prompt", "<|im_start|>assistant\n"}, {"max_tokens", 30}, {"temperature", 0}});
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.body_json()["choices"][0]["text"], "analysisokassistantfinalHi there") << c.body;
}

// --tool-call-parser openai alone (vLLM's gpt-oss habit): the channels split without a reasoning
// parser named, and the analysis, then a message to functions.get_weather, answer as
// reasoning_content and a tool call, whole and streamed.
TEST(HarmonyServer, MessageToAFunctionIsAToolCall) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  const HarmonyTokens h = harmony_tokenizer();
  const Tokenizer& tok = h.tokenizer;
  std::vector<int32_t> chain = {tok.encode("<|im_start|>assistant\n", false, true).back()};
  const auto append = [&](std::vector<int32_t> ids) {
    chain.insert(chain.end(), ids.begin(), ids.end());
  };
  append({h.ids.channel[0]});
  append(text_tokens(tok, "analysis"));
  append({h.ids.message[0]});
  append(text_tokens(tok, "ok"));
  append({h.ids.end, h.ids.start});
  append(text_tokens(tok, "assistant"));
  append({h.ids.channel[1]});
  append(text_tokens(tok, "commentary to=functions.get_weather"));
  append({h.ids.message[1]});
  append(text_tokens(tok, "{\"city\": \"Paris\"}"));
  chain.push_back(*tok.eos_id());
  std::vector<int32_t> sorted = chain;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end())
      << "the scripted chain repeats a token";
  LoadedModel model = scripted_qwen3(chain);
  model.tokenizer = h.tokenizer;
  server::ServerOptions o;
  o.tool_call_parser = "openai";
  o.enable_auto_tool_choice = true;
  TestServer s(std::move(model), server_engine(1024), o);
  const json tool = {
      {"type", "function"},
      {"function",
       {{"name", "get_weather"},
        {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}};
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}})},
               {"tools", json::array({tool})},
               {"max_tokens", 40},
               {"temperature", 0}};
  const HttpResult r = post(s.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = r.body_json();
  const json& choice = answer["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.body;
  EXPECT_EQ(choice["message"]["reasoning_content"], "ok") << r.body;
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.body;
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], "{\"city\": \"Paris\"}");
  body["stream"] = true;
  const StreamResult st = stream(s.port(), "/v1/chat/completions", body);
  ASSERT_EQ(st.status, 200) << st.error_body;
  const StreamedChat streamed = streamed_chat(st);
  EXPECT_EQ(streamed.reasoning, "ok");
  EXPECT_EQ(streamed.content, "");
  ASSERT_EQ(streamed.tool_calls.size(), 1u);
  EXPECT_EQ(streamed.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(streamed.tool_calls[0]["function"]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_EQ(streamed.finish_reason, "tool_calls");
}

// --tool-call-parser openai reads harmony only: another reasoning parser beside it is refused.
TEST(HarmonyServer, OpenaiToolParserRefusesAnotherReasoningParser) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  server::ServerOptions o;
  o.tool_call_parser = "openai";
  o.reasoning_parser = "qwen3";
  try {
    TestServer s(scripted_qwen3({1, 2}), server_engine(1024), o);
    FAIL() << "accepted --reasoning-parser qwen3 beside --tool-call-parser openai";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("openai_gptoss"), std::string::npos) << e.what();
  }
}

// A client sends back the reasoning_content it was answered with; gpt-oss's template reads the
// analysis of an assistant turn from `thinking`.
TEST(HarmonyServer, ReasoningContentReachesTheTemplateAsThinking) {
  const ChatTemplate tmpl(
      "{% for m in messages %}{{ m.role }}[{{ m.thinking }}|{{ m.content }}]{% endfor %}", "", "");
  server::ModelContext model;
  model.chat_template = &tmpl;
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(R"({"messages": [
    {"role": "user", "content": "Hi", "reasoning_content": "not an assistant's"},
    {"role": "assistant", "content": "Hello", "reasoning_content": "greet"},
    {"role": "assistant", "content": "Let me check", "reasoning_content": "need a tool",
     "tool_calls": [{"id": "c", "type": "function",
                     "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "assistant", "thinking": "given", "reasoning_content": "other", "content": "x"}]})");
  EXPECT_EQ(server::render_chat_prompt(body, model),
            "user[|Hi]assistant[|Hello]assistant[|Let me check]assistant[given|x]");
  model.reasoning_parser = server::ReasoningFormat::GptOss;
  EXPECT_EQ(server::render_chat_prompt(body, model),
            "user[|Hi]assistant[greet|Hello]assistant[need a tool|]assistant[given|x]");
}

}  // namespace
}  // namespace tern::testing
