// Request fields tern does not act on are 400s naming them; the ones it acts on, and values that
// ask for nothing, pass.
#include "tern/server/request_fields.h"

#include <gtest/gtest.h>

#include "tern/server/api_error.h"

namespace tern::server {
namespace {

using nlohmann::json;

std::string refusal(const json& body, Endpoint endpoint) {
  try {
    check_request_fields(body, endpoint);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param() + ": " + e.what();
  }
  return "";
}

TEST(RequestFields, WhatTernActsOnPasses) {
  const json chat = json::parse(R"({"model":"m","messages":[],"temperature":0.5,"top_p":0.9,
      "top_k":5,"min_p":0.1,"n":2,"seed":1,"max_tokens":4,"max_completion_tokens":4,"stop":["x"],
      "stop_token_ids":[1],"min_tokens":1,"ignore_eos":true,"presence_penalty":0.1,
      "frequency_penalty":0.1,"repetition_penalty":1.1,"logprobs":true,"top_logprobs":2,
      "stream":true,"stream_options":{"include_usage":true},"chat_template_kwargs":{},
      "add_generation_prompt":true,"include_stop_str_in_output":false,"skip_special_tokens":true,
      "kv_transfer_params":{},"user":"u1","store":false,"echo":false,
      "tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required",
      "parallel_tool_calls":false})");
  EXPECT_EQ(refusal(chat, Endpoint::ChatCompletions), "");
  const json completion = json::parse(
      R"({"model":"m","prompt":"x","logprobs":2,"echo":false,"best_of":1,"max_tokens":3})");
  EXPECT_EQ(refusal(completion, Endpoint::Completions), "");
  // Constrained decoding, on both endpoints (their values are checked when parsed).
  for (const Endpoint e : {Endpoint::ChatCompletions, Endpoint::Completions})
    for (const char* body :
         {R"({"response_format":{"type":"json_object"}})", R"({"guided_json":{"type":"object"}})",
          R"({"guided_regex":"a"})", R"({"guided_choice":["a"]})",
          R"({"guided_grammar":"root ::= \"a\""})", R"({"structured_outputs":{"regex":"a"}})",
          R"({"grammar":"root ::= \"a\""})", R"({"json_schema":{"type":"string"}})"})
      EXPECT_EQ(refusal(json::parse(body), e), "") << body;
  // Values that ask for nothing, and nulls.
  EXPECT_EQ(refusal(json::parse(R"({"tools":[],"tool_choice":"none","parallel_tool_calls":true,
      "logit_bias":{},"response_format":null})"),
                    Endpoint::ChatCompletions),
            "");
}

TEST(RequestFields, WhatItDoesNotIsRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"functions":[{"name":"f"}]})", "functions: tern does not support"},
      {R"({"function_call":"auto"})", "function_call: tern does not support"},
      {R"({"logit_bias":{"5":10}})", "logit_bias: tern does not support"},
      {R"({"guided_decoding_backend":"xgrammar"})",
       "guided_decoding_backend: tern does not support"},
      {R"({"store":true})", "store: tern stores no completions"},
      {R"({"echo":true})", "echo: tern does not support"},
      {R"({"temprature":0})", "temprature: unknown field 'temprature' for /v1/chat/completions"},
  };
  for (const auto& [body, want] : cases) {
    const std::string got = refusal(json::parse(body), Endpoint::ChatCompletions);
    EXPECT_EQ(got.rfind(want, 0), 0u) << body << " → " << got;
  }
  EXPECT_EQ(refusal(json::parse(R"({"suffix":"x"})"), Endpoint::Completions)
                .rfind("suffix: tern does not support", 0),
            0u);
  // Tools are chat's.
  EXPECT_NE(refusal(json::parse(R"({"tools":[{"type":"function","function":{"name":"f"}}]})"),
                    Endpoint::Completions)
                .find("unknown field 'tools'"),
            std::string::npos);
  // A chat-only field is unknown to completions.
  EXPECT_NE(refusal(json::parse(R"({"messages":[]})"), Endpoint::Completions).find("unknown field"),
            std::string::npos);
}

TEST(RequestFields, AMisspelledFieldNamesTheNearestKnownOne) {
  EXPECT_NE(refusal(json::parse(R"({"temprature":0})"), Endpoint::ChatCompletions)
                .find("(did you mean 'temperature'?)"),
            std::string::npos);
  EXPECT_NE(refusal(json::parse(R"({"max_token":8})"), Endpoint::Completions)
                .find("unknown field 'max_token' for /v1/completions (did you mean 'max_tokens'?)"),
            std::string::npos);
  // Nothing near: no guess.
  EXPECT_EQ(refusal(json::parse(R"({"zzzz":1})"), Endpoint::Completions).find("did you mean"),
            std::string::npos);
}

}  // namespace
}  // namespace tern::server
