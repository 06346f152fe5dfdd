// Tools through tern serve's HTTP routes (an in-process OpenAIServer over a dummy Qwen3 shape
// with the real Qwen tokenizer and template): the tools reach the prompt, the 400s of vLLM's
// rules, and streamed and whole answers agree through the output parsers. The dummy model's
// text is random, so the tool_calls fields themselves are checked in tool_request_test.cpp from
// given outputs.
#include <gtest/gtest.h>

#include "server/server_test_util.h"
#include "tern/core/error.h"
#include "tern/tokenizer/chat_template.h"

namespace tern::testing {
namespace {

json weather_tools() {
  return json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather in a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
}

server::ServerOptions tool_options(bool auto_choice) {
  server::ServerOptions o;
  o.tool_call_parser = "hermes";
  o.enable_auto_tool_choice = auto_choice;
  o.reasoning_parser = "qwen3";
  return o;
}

TEST(ToolCallServer, ToolsReachTheTemplateAndAnswersParse) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  LoadedModel model = tiny_chat_qwen3();
  const Tokenizer tok = *model.tokenizer;
  TestServer s(std::move(model), server_engine(1024), tool_options(true));
  const json messages = json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  json body = {{"messages", messages}, {"tools", weather_tools()}, {"max_tokens", 12},
               {"temperature", 0}, {"ignore_eos", true}};
  const HttpResult r = post(s.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = r.body_json();
  // The prompt is the template's render with the tools.
  const ChatTemplate tmpl = ChatTemplate::from_tokenizer(tok);
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  kwargs["tools"] = nlohmann::ordered_json::parse(weather_tools().dump());
  const std::string want = tmpl.render(nlohmann::ordered_json::parse(messages.dump()), true, kwargs);
  // (nlohmann::json sorts keys: the test client sends them sorted.)
  ASSERT_NE(want.find("<tools>\n{\"function\": {\"description\": \"Weather in a city\""),
            std::string::npos) << want;
  EXPECT_EQ(answer["usage"]["prompt_tokens"], tok.encode(want, false, true).size());
  const json& message = answer["choices"][0]["message"];
  EXPECT_TRUE(message.contains("reasoning_content"));  // --reasoning-parser
  EXPECT_TRUE(message["content"].is_string() || message["content"].is_null());

  // Streamed, greedy: the same split of the same text.
  body["stream"] = true;
  const StreamResult st = stream(s.port(), "/v1/chat/completions", body);
  ASSERT_EQ(st.status, 200) << st.error_body;
  ASSERT_TRUE(st.done);
  std::string content, reasoning;
  json finish;
  for (const json& e : st.events) {
    const json& delta = e["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(content, message["content"].is_null() ? "" : message["content"].get<std::string>());
  EXPECT_EQ(reasoning, message["reasoning_content"].is_null()
                           ? ""
                           : message["reasoning_content"].get<std::string>());
  EXPECT_EQ(finish, answer["choices"][0]["finish_reason"]);
}

TEST(ToolCallServer, VllmsToolChoiceRulesAreHttp400s) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  TestServer plain(tiny_chat_qwen3(), server_engine(1024));
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  const json with_tools = {{"messages", messages}, {"tools", weather_tools()}, {"max_tokens", 2}};
  // Tools with the default "auto" on a server without --enable-auto-tool-choice.
  HttpResult r = post(plain.port(), "/v1/chat/completions", with_tools);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("--enable-auto-tool-choice"), std::string::npos) << r.body;
  EXPECT_EQ(r.body_json()["error"]["param"], "tool_choice");
  // "none" renders them and answers as text.
  json none = with_tools;
  none["tool_choice"] = "none";
  r = post(plain.port(), "/v1/chat/completions", none);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(r.body_json()["choices"][0]["message"].contains("tool_calls"));
  // A tool without a name.
  json bad = with_tools;
  bad["tools"][0]["function"].erase("name");
  r = post(plain.port(), "/v1/chat/completions", bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body_json()["error"]["param"], "tools");
  // The legacy functions form stays refused.
  json legacy = {{"messages", messages}, {"functions", json::array({{{"name", "f"}}})}};
  r = post(plain.port(), "/v1/chat/completions", legacy);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body_json()["error"]["param"], "functions");
}

TEST(ToolCallServer, UnknownParserNamesStopTheServer) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  server::ServerOptions o;
  o.tool_call_parser = "mistral";
  EXPECT_THROW({ TestServer t(tiny_chat_qwen3(), server_engine(), o); }, tern::Error);
  o = {};
  o.enable_auto_tool_choice = true;  // without a parser, as vLLM refuses it
  EXPECT_THROW({ TestServer t(tiny_chat_qwen3(), server_engine(), o); }, tern::Error);
  o = {};
  o.reasoning_parser = "granite";
  EXPECT_THROW({ TestServer t(tiny_chat_qwen3(), server_engine(), o); }, tern::Error);
}

}  // namespace
}  // namespace tern::testing
