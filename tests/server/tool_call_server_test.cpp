// Tools through tern serve's HTTP routes (an in-process OpenAIServer over a dummy Qwen3 shape
// with the real Qwen tokenizer and template): the tools reach the prompt, the 400s of vLLM's
// rules, streamed and whole answers agree through the output parsers, and a model whose
// weights are set so that greedy decoding writes a Hermes tool call answers with tool_calls.
#include <gtest/gtest.h>

#include "server/server_test_util.h"
#include "shared_tokenizer.h"
#include "structured/schema_validator.h"
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

struct ScriptedServer {
  std::unique_ptr<TestServer> server;
  json messages;
};

ScriptedServer scripted_server() {
  const Tokenizer tok = testing::shared_tokenizer("qwen-tokenizer");
  ScriptedServer out;
  out.messages = json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  const std::vector<int32_t> chain = scripted_tool_call_chain(tok);
  out.server =
      std::make_unique<TestServer>(scripted_qwen3(chain), server_engine(1024), tool_options(true));
  return out;
}

TEST(ToolCallServer, ScriptedModelAnswersWithToolCalls) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  ScriptedServer s = scripted_server();
  json body = {
      {"messages", s.messages}, {"tools", weather_tools()}, {"max_tokens", 40}, {"temperature", 0}};
  const HttpResult r = post(s.server->port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = r.body_json();
  const json& choice = answer["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.body;
  const json& m = choice["message"];
  EXPECT_EQ(m["content"], "Checking.") << r.body;
  ASSERT_TRUE(m.contains("tool_calls")) << r.body;
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));

  // Streamed: content, then the call's header, then its arguments in pieces.
  body["stream"] = true;
  const StreamResult st = stream(s.server->port(), "/v1/chat/completions", body);
  ASSERT_EQ(st.status, 200) << st.error_body;
  std::string content, arguments, name;
  int headers = 0, argument_pieces = 0;
  json finish;
  for (const json& e : st.events) {
    const json& delta = e["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
    if (!delta.contains("tool_calls")) continue;
    for (const json& call : delta["tool_calls"]) {
      EXPECT_EQ(call["index"], 0);
      if (call.contains("id")) {
        ++headers;
        name = call["function"]["name"];
        EXPECT_EQ(call["function"]["arguments"], "");
      } else {
        ++argument_pieces;
        arguments += call["function"]["arguments"].get<std::string>();
      }
    }
  }
  EXPECT_EQ(content, "Checking.");
  EXPECT_EQ(headers, 1);
  EXPECT_EQ(name, "get_weather");
  EXPECT_GT(argument_pieces, 1);  // streamed as the tokens came
  EXPECT_EQ(json::parse(arguments), json({{"city", "Paris"}}));
  EXPECT_EQ(finish, "tool_calls");

  // tool_choice "none": the same text is content.
  body["stream"] = false;
  body["tool_choice"] = "none";
  const HttpResult none = post(s.server->port(), "/v1/chat/completions", body);
  ASSERT_EQ(none.status, 200) << none.body;
  EXPECT_EQ(none.body_json()["choices"][0]["message"]["content"], kScriptedToolCallAnswer);
  EXPECT_EQ(none.body_json()["choices"][0]["finish_reason"], "stop");
}

json two_tools() {
  return json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 8},
                       "days": {"type": "integer"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
        "properties": {"tz": {"enum": ["UTC", "CET", "JST"]}}, "required": ["tz"]}}}])");
}

// The violation of `call`'s arguments against its tool's parameters ("" when they satisfy them).
std::string call_violation(const json& call, const json& tools) {
  for (const json& tool : tools)
    if (tool["function"]["name"] == call["function"]["name"]) {
      const std::string arguments = call["function"]["arguments"];
      if (!json::accept(arguments)) return "arguments are not JSON: " + arguments;
      const json& schema = tool["function"]["parameters"];
      return schema_violation(json::parse(arguments), schema, schema);
    }
  return "no tool named " + call["function"]["name"].dump();
}

// Random weights write whatever the mask leaves them: every call of tool_choice "required"
// and of a named function parses and satisfies its tool's schema, with no --tool-call-parser.
TEST(ToolCallServer, RequiredAndNamedChoicesAreEnforced) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  TestServer s(tiny_chat_qwen3(), server_engine(1024));
  const json tools = two_tools();
  const json messages = json::array({{{"role", "user"}, {"content", "Weather and time?"}}});
  const json named = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  int required_answers = 0, several_calls = 0;
  for (int seed = 0; seed < 8; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    json body = {{"messages", messages}, {"tools", tools},     {"tool_choice", "required"},
                 {"max_tokens", 400},    {"temperature", 1.0}, {"seed", seed}};
    if (seed % 4 == 3) body["parallel_tool_calls"] = false;
    HttpResult r = post(s.port(), "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    json choice = r.body_json()["choices"][0];
    if (choice["finish_reason"] != "length") {
      ++required_answers;
      EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.body;
      EXPECT_TRUE(choice["message"]["content"].is_null()) << r.body;
      const json& calls = choice["message"]["tool_calls"];
      ASSERT_GE(calls.size(), 1u) << r.body;
      if (seed % 4 == 3) {
        EXPECT_EQ(calls.size(), 1u) << r.body;
      }
      several_calls += calls.size() > 1;
      for (const json& call : calls) EXPECT_EQ(call_violation(call, tools), "") << r.body;
      // Streamed with the same seed: the same calls, arguments in pieces.
      body["stream"] = true;
      const StreamResult st = stream(s.port(), "/v1/chat/completions", body);
      ASSERT_TRUE(st.done) << st.error_body;
      const StreamedChat streamed = streamed_chat(st);
      EXPECT_EQ(streamed.finish_reason, "tool_calls");
      ASSERT_EQ(streamed.tool_calls.size(), calls.size());
      for (size_t i = 0; i < calls.size(); ++i)
        EXPECT_EQ(streamed.tool_calls[i]["function"], calls[i]["function"]);
    }

    body = {{"messages", messages}, {"tools", tools},     {"tool_choice", named},
            {"max_tokens", 400},    {"temperature", 1.0}, {"seed", seed}};
    r = post(s.port(), "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    choice = r.body_json()["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "stop") << r.body;  // OpenAI's and vLLM's for a named call
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.body;
    EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_time");
    EXPECT_EQ(call_violation(choice["message"]["tool_calls"][0], tools), "") << r.body;
  }
  EXPECT_GE(required_answers, 6);
  EXPECT_GE(several_calls, 1);  // parallel calls happen when allowed
}

TEST(ToolCallServer, EnforcedToolChoiceRefusals) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  TestServer s(tiny_chat_qwen3(), server_engine(1024));
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  // Two constraints: the request's own and the tool call's.
  json both = {{"messages", messages},
               {"tools", two_tools()},
               {"tool_choice", "required"},
               {"response_format", {{"type", "json_object"}}}};
  HttpResult r = post(s.port(), "/v1/chat/completions", both);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.body_json()["error"]["param"], "response_format") << r.body;
  // Parameters outside the enforceable subset are refused, never loosened.
  json tools = two_tools();
  tools[0]["function"]["parameters"]["properties"]["days"]["multipleOf"] = 2;
  const json unenforceable = {
      {"messages", messages}, {"tools", tools}, {"tool_choice", "required"}};
  r = post(s.port(), "/v1/chat/completions", unenforceable);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.body_json()["error"]["param"], "tools") << r.body;
  EXPECT_NE(r.body.find("multipleOf"), std::string::npos) << r.body;
  // A named function that is not among the tools.
  const json unknown = {{"messages", messages},
                        {"tools", two_tools()},
                        {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}};
  r = post(s.port(), "/v1/chat/completions", unknown);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.body_json()["error"]["param"], "tool_choice") << r.body;
}

// scripted_qwen3's chain that answers a Qwen-template prompt with "<think>ok</think>Hi there".
std::vector<int32_t> think_chain() {
  const Tokenizer tok = testing::shared_tokenizer("qwen-tokenizer");
  std::vector<int32_t> chain = {tok.encode("<|im_start|>assistant\n", false, true).back()};
  for (int32_t id : tok.encode("<think>ok</think>Hi there", false, true)) chain.push_back(id);
  chain.push_back(*tok.eos_id());
  return chain;
}

// <think>ok</think>Hi there: reasoning, then content, split by --reasoning-parser.
TEST(ReasoningServer, ScriptedThinkIsReasoningContent) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  const std::vector<int32_t> chain = think_chain();
  for (const char* parser : {"qwen3", "deepseek_r1"}) {
    server::ServerOptions o;
    o.reasoning_parser = parser;
    TestServer s(scripted_qwen3(chain), server_engine(1024), o);
    json body = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                 {"max_tokens", 20},
                 {"temperature", 0}};
    const HttpResult r = post(s.port(), "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json answer = r.body_json();
    const json& m = answer["choices"][0]["message"];
    EXPECT_EQ(m["reasoning_content"], "ok") << parser;
    EXPECT_EQ(m["content"], "Hi there") << parser;
    EXPECT_EQ(answer["choices"][0]["finish_reason"], "stop");
    body["stream"] = true;
    const StreamResult st = stream(s.port(), "/v1/chat/completions", body);
    ASSERT_EQ(st.status, 200) << st.error_body;
    const StreamedChat streamed = streamed_chat(st);
    EXPECT_EQ(streamed.reasoning, "ok") << parser;
    EXPECT_EQ(streamed.content, "Hi there") << parser;
  }
  // Without a reasoning parser the tags stay in the content.
  TestServer plain(scripted_qwen3(chain), server_engine(1024));
  const HttpResult r = post(plain.port(), "/v1/chat/completions",
                            {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                             {"max_tokens", 20},
                             {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body_json()["choices"][0]["message"]["content"], "<think>ok</think>Hi there");
  EXPECT_FALSE(r.body_json()["choices"][0]["message"].contains("reasoning_content"));
}

// With a reasoning parser a constraint waits for </think>, as vLLM's structured outputs do: the
// scripted model thinks "ok" freely, then the choice it did not want is enforced. When the
// template has ended the reasoning in the prompt (enable_thinking false), the constraint holds
// from the first token.
TEST(ReasoningServer, ConstraintAppliesAfterTheReasoning) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  const std::vector<int32_t> chain = think_chain();
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  for (const char* parser : {"qwen3", "deepseek_r1"}) {
    SCOPED_TRACE(parser);
    server::ServerOptions o;
    o.reasoning_parser = parser;
    TestServer s(scripted_qwen3(chain), server_engine(1024), o);
    json body = {{"messages", messages},
                 {"max_tokens", 20},
                 {"temperature", 0},
                 {"guided_choice", {"Bye", "Later"}}};
    HttpResult r = post(s.port(), "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    json m = r.body_json()["choices"][0]["message"];
    EXPECT_EQ(m["reasoning_content"], "ok") << r.body;
    EXPECT_TRUE(m["content"] == "Bye" || m["content"] == "Later") << r.body;
    if (std::string(parser) == "qwen3") {
      body["chat_template_kwargs"] = {{"enable_thinking", false}};
      r = post(s.port(), "/v1/chat/completions", body);
      ASSERT_EQ(r.status, 200) << r.body;
      m = r.body_json()["choices"][0]["message"];
      EXPECT_TRUE(m["reasoning_content"].is_null()) << r.body;
      EXPECT_TRUE(m["content"] == "Bye" || m["content"] == "Later") << r.body;
    }
  }
  // Without a reasoning parser the constraint holds from the first token: no thinking.
  TestServer plain(scripted_qwen3(chain), server_engine(1024));
  const HttpResult r = post(plain.port(), "/v1/chat/completions",
                            {{"messages", messages},
                             {"max_tokens", 20},
                             {"temperature", 0},
                             {"guided_choice", {"Bye", "Later"}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json content = r.body_json()["choices"][0]["message"]["content"];
  EXPECT_TRUE(content == "Bye" || content == "Later") << r.body;
}

TEST(ToolCallServer, ToolsReachTheTemplateAndAnswersParse) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  LoadedModel model = tiny_chat_qwen3();
  const Tokenizer tok = *model.tokenizer;
  TestServer s(std::move(model), server_engine(1024), tool_options(true));
  const json messages = json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  json body = {{"messages", messages},
               {"tools", weather_tools()},
               {"max_tokens", 12},
               {"temperature", 0},
               {"ignore_eos", true}};
  const HttpResult r = post(s.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = r.body_json();
  // The prompt is the template's render with the tools.
  const ChatTemplate tmpl = ChatTemplate::from_tokenizer(tok);
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  kwargs["tools"] = nlohmann::ordered_json::parse(weather_tools().dump());
  const std::string want =
      tmpl.render(nlohmann::ordered_json::parse(messages.dump()), true, kwargs);
  // (nlohmann::json sorts keys: the test client sends them sorted.)
  ASSERT_NE(want.find("<tools>\n{\"function\": {\"description\": \"Weather in a city\""),
            std::string::npos)
      << want;
  EXPECT_EQ(answer["usage"]["prompt_tokens"], tok.encode(want, false, true).size());
  const json& message = answer["choices"][0]["message"];
  EXPECT_TRUE(message.contains("reasoning_content"));  // --reasoning-parser
  EXPECT_TRUE(message["content"].is_string() || message["content"].is_null());

  // Streamed, greedy: the same split of the same text.
  body["stream"] = true;
  const StreamResult st = stream(s.port(), "/v1/chat/completions", body);
  ASSERT_EQ(st.status, 200) << st.error_body;
  ASSERT_TRUE(st.done);
  const StreamedChat streamed = streamed_chat(st);
  EXPECT_EQ(streamed.content,
            message["content"].is_null() ? "" : message["content"].get<std::string>());
  EXPECT_EQ(streamed.reasoning, message["reasoning_content"].is_null()
                                    ? ""
                                    : message["reasoning_content"].get<std::string>());
  EXPECT_EQ(streamed.finish_reason, answer["choices"][0]["finish_reason"]);
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
