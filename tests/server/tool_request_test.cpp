// Tools in chat requests: what reaches the chat template (Qwen3's and Llama 3.2's, compared
// with the text read off each template), the 400s of malformed tools, and the OpenAI response
// and stream chunks built from a given output text.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "fixtures.h"
#include "server/chat_output_options.h"
#include "shared_tokenizer.h"
#include "tern/server/api_error.h"
#include "tern/server/openai_protocol.h"
#include "tern/server/openai_responses.h"

namespace tern::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* kWeatherTool = R"({"type": "function", "function": {"name": "get_weather",
  "description": "Weather", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}}, "required": ["city"]}}})";

ordered_json history_body() {
  return ordered_json::parse(std::string(R"({"messages": [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 18}"}],
    "tools": [)") + kWeatherTool +
                             "]}");
}

TEST(ToolCallTemplate, Qwen3RendersToolsCallsAndResponses) {
  TERN_REQUIRE_FIXTURE("chat-templates/Qwen-Qwen3-0.6B.jinja");
  const ChatTemplate tmpl(read_text(testing::fixture("chat-templates/Qwen-Qwen3-0.6B.jinja")), "",
                          "<|im_end|>");
  ModelContext model;
  model.chat_template = &tmpl;
  // Read off the template: the tools block in the system turn (each tool as tojson writes it),
  // the call with its arguments object written by tojson, the tool turn as a user turn.
  const std::string want =
      "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user "
      "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n"
      "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
      "\"description\": \"Weather\", \"parameters\": {\"type\": \"object\", \"properties\": "
      "{\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each "
      "function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
      "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\n<tool_response>\n{\"temp\": 18}\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\n";
  EXPECT_EQ(render_chat_prompt(history_body(), model), want);
  // Without tools the system turn is gone: the tools are what changed the prompt.
  ordered_json plain = ordered_json::parse(R"({"messages": [{"role": "user", "content": "Hi"}]})");
  EXPECT_EQ(render_chat_prompt(plain, model),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // enable_thinking=false still works beside tools.
  ordered_json no_think = history_body();
  no_think["chat_template_kwargs"] = {{"enable_thinking", false}};
  EXPECT_EQ(render_chat_prompt(no_think, model), want + "<think>\n\n</think>\n\n");
}

TEST(ToolCallTemplate, Llama32RendersToolsInTheFirstUserMessage) {
  TERN_REQUIRE_FIXTURE("chat-templates/meta-llama-Llama-3.2-3B-Instruct.jinja");
  const ChatTemplate tmpl(
      read_text(testing::fixture("chat-templates/meta-llama-Llama-3.2-3B-Instruct.jinja")),
      "<|begin_of_text|>", "<|eot_id|>");
  ModelContext model;
  model.chat_template = &tmpl;
  ordered_json body = history_body();
  body["messages"].insert(body["messages"].begin(),
                          ordered_json::object({{"role", "system"}, {"content", "Be brief."}}));
  body["chat_template_kwargs"] = {{"date_string", "26 Jul 2024"}};
  const std::string tool_json =
      "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n"
      "        \"description\": \"Weather\",\n        \"parameters\": {\n            \"type\": "
      "\"object\",\n            \"properties\": {\n                \"city\": {\n                "
      "    \"type\": \"string\"\n                }\n            },\n            \"required\": "
      "[\n                \"city\"\n            ]\n        }\n    }\n}";
  const std::string want =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n"
      "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond "
      "with a JSON for a function call with its proper arguments that best answers the given "
      "prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of "
      "argument name and its value}.Do not use variables.\n\n" +
      tool_json +
      "\n\nWeather in Paris?<|eot_id|>"
      // The arguments string was parsed, so `arguments | tojson` writes the object once.
      "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", "
      "\"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"
      // A string is iterable to Jinja, so this template writes the tool's content as JSON text.
      "<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": 18}\"<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(render_chat_prompt(body, model), want);
}

std::string refusal(const std::string& body, const ModelContext& model) {
  try {
    parse_tool_request(ordered_json::parse(body), model);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param() + ": " + e.what();
  }
  return "";
}

ModelContext hermes_model(bool auto_choice) {
  ModelContext m;
  m.tool_call_parser = ToolCallFormat::Hermes;
  m.enable_auto_tool_choice = auto_choice;
  return m;
}

TEST(ToolCallRequest, MalformedToolsAreRefusedByField) {
  const ModelContext m = hermes_model(true);
  const std::pair<const char*, const char*> cases[] = {
      {R"({"tools": {}})", "tools: 'tools' must be a list"},
      {R"({"tools": [{"function": {"name": "f"}}]})", "tools: tools[0].type must be \"function\""},
      {R"({"tools": [{"type": "function"}]})", "tools: tools[0].function must be an object"},
      {R"({"tools": [{"type": "function", "function": {"description": "d"}}]})",
       "tools: tools[0].function.name is required"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]})",
       "tools: tools[0].function.parameters must be a JSON schema object"},
      {R"({"tool_choice": "auto"})", "tool_choice: When using `tool_choice`, `tools` must be set."},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "any"})",
       "tool_choice: 'tool_choice' must be"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}],
          "tool_choice": {"type": "function", "function": {"name": "g"}}})",
       "tool_choice: Tool 'g' has not been passed in `tools`."},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}], "parallel_tool_calls": 1})",
       "parallel_tool_calls: 'parallel_tool_calls' must be true or false"},
  };
  for (const auto& [body, want] : cases) {
    const std::string got = refusal(body, m);
    EXPECT_EQ(got.rfind(want, 0), 0u) << body << " → " << got;
  }
}

TEST(ToolCallRequest, AutoNeedsEnableAutoToolChoiceAsInVllm) {
  const std::string tools = R"({"tools": [{"type": "function", "function": {"name": "f"}}]})";
  EXPECT_EQ(refusal(tools, hermes_model(false)),
            "tool_choice: \"auto\" tool choice requires --enable-auto-tool-choice and "
            "--tool-call-parser to be set");
  EXPECT_EQ(refusal(tools, ModelContext{}).rfind("tool_choice: \"auto\"", 0), 0u);
  EXPECT_EQ(refusal(tools, hermes_model(true)), "");
  // "none" renders the tools and parses nothing: allowed on any server.
  const ToolRequest none = parse_tool_request(
      ordered_json::parse(R"({"tools": [{"type": "function", "function": {"name": "f"}}],
                              "tool_choice": "none"})"),
      ModelContext{});
  EXPECT_EQ(none.choice, ToolRequest::Choice::None);
  EXPECT_EQ(none.tools.size(), 1u);
}

TEST(ToolCallRequest, RequiredAndNamedCarryTheirSchema) {
  const std::string base = std::string(R"({"tools": [)") + kWeatherTool + "], \"tool_choice\": ";
  const ToolRequest named = parse_tool_request(
      ordered_json::parse(base + R"({"type": "function", "function": {"name": "get_weather"}}})"),
      hermes_model(false));
  EXPECT_EQ(named.choice, ToolRequest::Choice::Named);
  EXPECT_EQ(named.function, "get_weather");
  EXPECT_EQ(named.constraint_schema["required"], ordered_json::array({"city"}));
  const ToolRequest required =
      parse_tool_request(ordered_json::parse(base + "\"required\"}"), hermes_model(false));
  EXPECT_EQ(required.choice, ToolRequest::Choice::Required);
  EXPECT_EQ(required.constraint_schema["type"], "array");
  EXPECT_EQ(required.constraint_schema["items"]["anyOf"][0]["properties"]["name"]["enum"][0],
            "get_weather");
  EXPECT_FALSE(required.constraint_schema.contains("maxItems"));
  // Constrained decoding writes the calls: no parser is needed (vLLM's rule).
  EXPECT_EQ(refusal(base + "\"required\"}", ModelContext{}), "");
  // parallel_tool_calls false allows one call.
  const ToolRequest one = parse_tool_request(
      ordered_json::parse(base + "\"required\", \"parallel_tool_calls\": false}"), ModelContext{});
  EXPECT_EQ(one.constraint_schema["maxItems"], 1);
}

TEST(ToolCallRequest, HistoryToolCallsAreChecked) {
  TERN_REQUIRE_FIXTURE("chat-templates/Qwen-Qwen3-0.6B.jinja");
  const ChatTemplate tmpl(read_text(testing::fixture("chat-templates/Qwen-Qwen3-0.6B.jinja")), "",
                          "");
  ModelContext model;
  model.chat_template = &tmpl;
  ordered_json body = history_body();
  body["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{not json";
  try {
    render_chat_prompt(body, model);
    ADD_FAILURE() << "bad arguments were accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("messages[1].tool_calls[0].function.arguments"),
              std::string::npos);
  }
}

CompletionOutput finished_output(const std::string& text, const std::string& finish = "stop") {
  CompletionOutput c;
  c.text = text;
  c.new_text = text;
  c.finish_reason = finish;
  return c;
}

TEST(ToolCallResponse, WholeResponseHasOpenAIToolCalls) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const Tokenizer tok = testing::shared_tokenizer("qwen-tokenizer");
  const ChatOutputOptions options =
      testing::parsers(ReasoningFormat::Qwen3, ToolCallFormat::Hermes);
  ResponseFormatter f(Endpoint::ChatCompletions, "chatcmpl-1", 0, "m", tok, 1, 1, options);
  const std::string text =
      "<think>\nweather needs a tool\n</think>\n\nChecking.\n<tool_call>\n{\"name\": "
      "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
  const json r = f.response({{finished_output(text)}}, Usage{});
  const json& choice = r["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& m = choice["message"];
  EXPECT_EQ(m["reasoning_content"], "\nweather needs a tool\n");
  EXPECT_EQ(m["content"], "\n\nChecking.\n");
  ASSERT_EQ(m["tool_calls"].size(), 2u);
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(m["tool_calls"][1]["function"]["arguments"].get<std::string>()),
            json({{"city", "Rome"}}));
  EXPECT_EQ(m["tool_calls"][0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_NE(m["tool_calls"][0]["id"], m["tool_calls"][1]["id"]);
  // A length cut keeps its finish_reason; no call, no tool_calls and content as written.
  const json cut = f.response({{finished_output("Just text", "length")}}, Usage{});
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(cut["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(cut["choices"][0]["message"]["content"], "Just text");
  EXPECT_TRUE(cut["choices"][0]["message"]["reasoning_content"].is_null());
}

TEST(ToolCallResponse, StreamChunksAreOpenAIs) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const Tokenizer tok = testing::shared_tokenizer("qwen-tokenizer");
  ResponseFormatter f(Endpoint::ChatCompletions, "chatcmpl-1", 0, "m", tok, 1, 1,
                      testing::parsers(std::nullopt, ToolCallFormat::Hermes));
  const std::vector<std::string> pieces = {
      "Sure", ". <tool", "_call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\"",
      ": \"Paris\"}}\n</tool_call>"};
  std::vector<json> chunks;
  std::string text;
  for (size_t i = 0; i < pieces.size(); ++i) {
    CompletionOutput c;
    text += pieces[i];
    c.new_text = pieces[i];
    c.text = text;
    if (i + 1 == pieces.size()) c.finish_reason = "stop";
    for (json& chunk : f.chunks(0, c)) chunks.push_back(std::move(chunk));
  }
  std::string content, arguments, id;
  int headers = 0;
  for (const json& chunk : chunks) {
    ASSERT_EQ(chunk["object"], "chat.completion.chunk");
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (!delta.contains("tool_calls")) continue;
    ASSERT_EQ(delta["tool_calls"].size(), 1u);
    const json& call = delta["tool_calls"][0];
    EXPECT_EQ(call["index"], 0);
    if (call.contains("id")) {
      ++headers;
      id = call["id"];
      EXPECT_EQ(call["type"], "function");
      EXPECT_EQ(call["function"]["name"], "get_weather");
      EXPECT_EQ(call["function"]["arguments"], "");
    } else {
      EXPECT_FALSE(call["function"].contains("name"));
      arguments += call["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(content, "Sure. ");
  EXPECT_EQ(headers, 1);
  EXPECT_EQ(id.rfind("call_", 0), 0u);
  EXPECT_EQ(json::parse(arguments), json({{"city", "Paris"}}));
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
  // Only the last chunk finishes.
  for (size_t i = 0; i + 1 < chunks.size(); ++i)
    EXPECT_TRUE(chunks[i]["choices"][0]["finish_reason"].is_null());
}

}  // namespace
}  // namespace tern::server
