// The constraint fields over HTTP: response_format (chat and completions), vLLM's guided_* and
// structured_outputs, llama.cpp's grammar and json_schema; their outputs parse and validate,
// streamed or not; conflicting or unsupported constraints are 400s naming the field.
#include <gtest/gtest.h>

#include <string>

#include "backend/vulkan_test_util.h"
#include "server/server_test_util.h"
#include "structured/schema_validator.h"

namespace tern::testing {
namespace {

const json kSchema = json::parse(R"({"type": "object", "properties": {
    "ok": {"type": "boolean"}, "n": {"type": "integer"},
    "word": {"type": "string", "maxLength": 6}}, "required": ["ok", "n"]})");

TEST(StructuredServer, CompletionsFieldsConstrainTheText) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), server_engine());
  const json base = {{"model", "test-model"},
                     {"prompt", "Once upon a time"},
                     {"max_tokens", 120},
                     {"temperature", 1.0}};
  const std::vector<std::pair<std::string, json>> forms = {
      {"response_format",
       {{"type", "json_schema"},
        {"json_schema", {{"name", "x"}, {"schema", kSchema}, {"strict", true}}}}},
      {"guided_json", kSchema},
      {"json_schema", kSchema},
      {"structured_outputs", {{"json", kSchema}}}};
  for (const auto& [field, value] : forms)
    for (int seed = 0; seed < 4; ++seed) {
      json body = base;
      body[field] = value;
      body["seed"] = seed;
      const HttpResult r = post(s.port(), "/v1/completions", body);
      ASSERT_EQ(r.status, 200) << field << ": " << r.body;
      const std::string text = r.body_json()["choices"][0]["text"];
      ASSERT_TRUE(json::accept(text)) << field << ": " << text;
      EXPECT_EQ(schema_violation(json::parse(text), kSchema, kSchema), "") << field << ": " << text;
    }
  json choice = base;
  choice["guided_choice"] = {"red", "green"};
  const std::string c = post(s.port(), "/v1/completions", choice).body_json()["choices"][0]["text"];
  EXPECT_TRUE(c == "red" || c == "green") << c;
  json regex = base;
  regex["guided_regex"] = "[0-9]{3}";
  const std::string digits =
      post(s.port(), "/v1/completions", regex).body_json()["choices"][0]["text"];
  EXPECT_TRUE(std::regex_match(digits, std::regex("[0-9]{3}"))) << digits;
  json grammar = base;
  grammar["grammar"] = "root ::= (\"ab\" | \"c\")+ \".\"";
  grammar["max_tokens"] = 200;
  const std::string g =
      post(s.port(), "/v1/completions", grammar).body_json()["choices"][0]["text"];
  EXPECT_TRUE(std::regex_match(g, std::regex("(ab|c)+\\."))) << g;
  // Streamed: the deltas add up to a valid document.
  json streamed = base;
  streamed["response_format"] = forms[0].second;
  streamed["stream"] = true;
  const StreamResult st = stream(s.port(), "/v1/completions", streamed);
  ASSERT_TRUE(st.done) << st.error_body;
  std::string text;
  for (const json& e : st.events)
    if (!e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
  ASSERT_TRUE(json::accept(text)) << text;
  EXPECT_EQ(schema_violation(json::parse(text), kSchema, kSchema), "") << text;
}

TEST(StructuredServer, ChatResponseFormat) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  TestServer s(tiny_chat_qwen3(), server_engine());
  const json messages = json::array({{{"role", "user"}, {"content", "JSON please"}}});
  for (int seed = 0; seed < 4; ++seed) {
    const json body = {
        {"model", "test-model"},
        {"messages", messages},
        {"max_tokens", 150},
        {"seed", seed},
        {"response_format",
         {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", kSchema}}}}}};
    const HttpResult r = post(s.port(), "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.body_json();
    const std::string content = j["choices"][0]["message"]["content"];
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
    ASSERT_TRUE(json::accept(content)) << content;
    EXPECT_EQ(schema_violation(json::parse(content), kSchema, kSchema), "") << content;
  }
  const json text = {{"model", "test-model"},
                     {"messages", messages},
                     {"max_tokens", 3},
                     {"response_format", {{"type", "text"}}}};
  EXPECT_EQ(post(s.port(), "/v1/chat/completions", text).status, 200);
}

TEST(StructuredServer, BadConstraintsAre400sNamingTheField) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), server_engine());
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"guided_regex", "a"}, {"guided_choice", {"b"}}}, "guided_choice"},
      {{{"response_format", {{"type", "json_object"}}}, {"grammar", "root ::= \"a\""}}, "grammar"},
      {{{"response_format",
         {{"type", "json_schema"},
          {"json_schema", {{"schema", {{"type", "integer"}, {"multipleOf", 2}}}}}}}},
       "response_format"},
      {{{"guided_json", {{"type", "object"}, {"minProperties", 1}}}}, "guided_json"},
      {{{"guided_regex", "(a)\\1"}}, "guided_regex"},
      {{{"guided_grammar", "root ::= undefined"}}, "guided_grammar"},
      {{{"response_format", {{"type", "yaml"}}}}, "response_format"},
      {{{"structured_outputs", {{"regex", "a"}, {"choice", {"b"}}}}}, "structured_outputs"},
  };
  for (const auto& [fields, param] : cases) {
    json body = {{"model", "test-model"}, {"prompt", "x"}, {"max_tokens", 4}};
    for (const auto& [k, v] : fields.items()) body[k] = v;
    const HttpResult r = post(s.port(), "/v1/completions", body);
    EXPECT_EQ(r.status, 400) << body.dump() << " → " << r.body;
    if (r.status == 400) {
      EXPECT_EQ(r.body_json()["error"]["param"], param) << r.body;
    }
  }
  const HttpResult r =
      post(s.port(), "/v1/completions",
           {{"prompt", "x"}, {"guided_json", {{"type", "integer"}, {"multipleOf", 2}}}});
  EXPECT_NE(r.body.find("unsupported JSON schema keyword 'multipleOf'"), std::string::npos)
      << r.body;
}

// The server with its model on the device: the constraints' masks apply to the Vulkan backend's
// logit rows on the host, so a greedy constrained completion is the CPU server's, token for
// token (stories260K's F32 logits agree to ~1e-7), streamed or not.
TEST(StructuredServer, OnVulkanAConstrainedGreedyCompletionIsTheCpus) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer cpu(stories260k(), server_engine());
  TestServer vulkan(stories260k_on_vulkan(), server_engine());
  const json base = {{"model", "test-model"},
                     {"prompt", "Once upon a time"},
                     {"max_tokens", 120},
                     {"temperature", 0.0}};
  const std::vector<std::pair<std::string, json>> forms = {
      {"response_format",
       {{"type", "json_schema"},
        {"json_schema", {{"name", "x"}, {"schema", kSchema}, {"strict", true}}}}},
      {"guided_regex", "[0-9]{3}"},
      {"grammar", "root ::= (\"ab\" | \"c\")+ \".\""}};
  for (const auto& [field, value] : forms) {
    json body = base;
    body[field] = value;
    const HttpResult on_cpu = post(cpu.port(), "/v1/completions", body);
    const HttpResult on_vulkan = post(vulkan.port(), "/v1/completions", body);
    ASSERT_EQ(on_vulkan.status, 200) << field << ": " << on_vulkan.body;
    ASSERT_EQ(on_cpu.status, 200) << field << ": " << on_cpu.body;
    const std::string text = on_vulkan.body_json()["choices"][0]["text"];
    EXPECT_EQ(text, on_cpu.body_json()["choices"][0]["text"]) << field;
    if (field == "response_format") {
      ASSERT_TRUE(json::accept(text)) << text;
      EXPECT_EQ(schema_violation(json::parse(text), kSchema, kSchema), "") << text;
      body["stream"] = true;
      const StreamResult st = stream(vulkan.port(), "/v1/completions", body);
      ASSERT_TRUE(st.done) << st.error_body;
      std::string streamed;
      for (const json& e : st.events)
        if (!e["choices"].empty()) streamed += e["choices"][0]["text"].get<std::string>();
      EXPECT_EQ(streamed, text);
    }
  }
}

}  // namespace
}  // namespace tern::testing
