// Every route of `tern serve`, streamed and not, against the tiny stories260K model (completions)
// and a tiny dummy Qwen3 with the real Qwen tokenizer and its chat template (chat).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "server/server_test_util.h"
#include "shared_tokenizer.h"
#include "tern/tokenizer/chat_template.h"

namespace tern::testing {
namespace {

TEST(OpenAIServer, ModelsHealthVersion) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), server_engine());
  const HttpResult models = get(s.port(), "/v1/models");
  ASSERT_EQ(models.status, 200);
  const json m = models.body_json();
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  EXPECT_EQ(m["data"][0]["id"], "test-model");
  EXPECT_EQ(m["data"][0]["object"], "model");
  EXPECT_EQ(m["data"][0]["max_model_len"], 256);
  EXPECT_EQ(get(s.port(), "/health").status, 200);
  const HttpResult version = get(s.port(), "/version");
  ASSERT_EQ(version.status, 200);
  EXPECT_TRUE(version.body_json()["version"].is_string());
}

// The README's `curl -d` sends Content-Type application/x-www-form-urlencoded; a body over
// 8 KiB got a false 413 ("larger than the server's limit of 16777216 bytes").
TEST(OpenAIServer, ACurlBodyIsJsonWhateverItsContentType) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), server_engine());
  const std::string body =
      R"({"prompt": "Once upon a time",)" + std::string(9000, ' ') + R"("max_tokens": 4})";
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain"}) {
    const HttpResult r =
        http_request(s.port(), "POST", "/v1/completions", body, {{"Content-Type", type}});
    ASSERT_EQ(r.status, 200) << type << ": " << r.body;
    EXPECT_EQ(r.body_json()["usage"]["completion_tokens"], 4) << type;
  }
}

TEST(OpenAIServer, CompletionMatchesOfflineGreedy) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), server_engine());
  LLM offline(stories260k(), server_engine());
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 24;
  const RequestOutput expected = offline.generate({std::string("Once upon a time")}, p)[0];

  const HttpResult r = post(s.port(), "/v1/completions",
                            {{"model", "test-model"},
                             {"prompt", "Once upon a time"},
                             {"max_tokens", 24},
                             {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = r.body_json();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_TRUE(body["created"].is_number_integer());
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["text"], expected.outputs[0].text);
  EXPECT_EQ(body["choices"][0]["finish_reason"], *expected.outputs[0].finish_reason);
  EXPECT_EQ(body["usage"]["prompt_tokens"], offline.tokenizer().encode("Once upon a time").size());
  EXPECT_EQ(body["usage"]["completion_tokens"], expected.outputs[0].token_ids.size());
  EXPECT_EQ(body["usage"]["total_tokens"], body["usage"]["prompt_tokens"].get<int>() +
                                               body["usage"]["completion_tokens"].get<int>());

  // The same streamed: the chunks add up to the same text; usage comes last with no choices.
  const StreamResult st = stream(s.port(), "/v1/completions",
                                 {{"prompt", "Once upon a time"},
                                  {"max_tokens", 24},
                                  {"temperature", 0},
                                  {"stream", true},
                                  {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(st.status, 200);
  EXPECT_TRUE(st.done);
  ASSERT_GE(st.events.size(), 2u);
  EXPECT_EQ(streamed_texts(st, 1)[0], expected.outputs[0].text);
  const json& last = st.events.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["completion_tokens"], expected.outputs[0].token_ids.size());
  const json& finish = st.events[st.events.size() - 2];
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  for (const json& e : st.events) {
    EXPECT_EQ(e["object"], "text_completion");
    EXPECT_EQ(e["id"], last["id"]);
  }

  // vLLM's continuous_usage_stats: every chunk carries the usage so far, growing to the total.
  const StreamResult cont =
      stream(s.port(), "/v1/completions",
             {{"prompt", "Once upon a time"},
              {"max_tokens", 24},
              {"temperature", 0},
              {"stream", true},
              {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}});
  ASSERT_EQ(cont.status, 200) << cont.error_body;
  ASSERT_GE(cont.events.size(), 3u);
  int64_t seen = 0;
  for (size_t i = 0; i + 1 < cont.events.size(); ++i) {
    const json& u = cont.events[i]["usage"];
    ASSERT_TRUE(u.is_object()) << cont.events[i];
    EXPECT_EQ(u["prompt_tokens"], last["usage"]["prompt_tokens"]);
    EXPECT_GE(u["completion_tokens"].get<int64_t>(), seen);
    seen = u["completion_tokens"].get<int64_t>();
  }
  EXPECT_EQ(seen, 24);
  EXPECT_EQ(cont.events.back()["usage"]["completion_tokens"], 24);
  // A key tern does not act on is refused, not ignored.
  const HttpResult unknown =
      post(s.port(), "/v1/completions",
           {{"prompt", "x"}, {"stream", true}, {"stream_options", {{"include_usgae", true}}}});
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_NE(unknown.body.find("stream_options.include_usgae"), std::string::npos) << unknown.body;
}

TEST(OpenAIServer, CompletionPromptShapesNAndLogprobs) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), server_engine());
  // Two prompts (one as token ids) × n = 2: four choices indexed prompt * n + completion.
  const HttpResult r = post(s.port(), "/v1/completions",
                            {{"prompt", json::array({json::array({1, 403, 407}), "Lily"})},
                             {"n", 2},
                             {"max_tokens", 4},
                             {"seed", 7},
                             {"logprobs", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = r.body_json();
  ASSERT_EQ(body["choices"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const json& c = body["choices"][i];
    EXPECT_EQ(c["index"], i);
    const json& lp = c["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), 4u);
    ASSERT_EQ(lp["token_logprobs"].size(), 4u);
    ASSERT_EQ(lp["text_offset"].size(), 4u);
    EXPECT_EQ(lp["text_offset"][0], 0);
    std::string joined;
    for (size_t t = 0; t < 4; ++t) {
      EXPECT_LE(lp["token_logprobs"][t].get<double>(), 0.0);
      EXPECT_GE(lp["top_logprobs"][t].size(), 2u);
      joined += lp["tokens"][t].get<std::string>();
    }
    EXPECT_EQ(joined, c["text"]);
  }
  EXPECT_EQ(body["usage"]["prompt_tokens"], 3 + stories260k().tokenizer->encode("Lily").size());
}

TEST(OpenAIServer, StopStringsAndDefaultMaxTokens) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), server_engine(64));
  const HttpResult r = post(s.port(), "/v1/completions",
                            {{"prompt", "Once upon a time"}, {"temperature", 0}, {"stop", "Lily"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json c = r.body_json()["choices"][0];
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_EQ(c["stop_reason"], "Lily");
  EXPECT_EQ(c["text"].get<std::string>().find("Lily"), std::string::npos);
  // No max_tokens: 16 (vLLM's default for a completion), however much context is left.
  const HttpResult sixteen = post(s.port(), "/v1/completions",
                                  {{"prompt", "Once"}, {"ignore_eos", true}, {"temperature", 0}});
  ASSERT_EQ(sixteen.status, 200) << sixteen.body;
  EXPECT_EQ(sixteen.body_json()["usage"]["completion_tokens"], 16);
  EXPECT_EQ(sixteen.body_json()["choices"][0]["finish_reason"], "length");
  // ... or what the context leaves when that is less: 64 - 60.
  const HttpResult rest =
      post(s.port(), "/v1/completions",
           {{"prompt", std::vector<int>(60, 1)}, {"ignore_eos", true}, {"temperature", 0}});
  ASSERT_EQ(rest.status, 200) << rest.body;
  EXPECT_EQ(rest.body_json()["usage"]["total_tokens"], 64);
  EXPECT_EQ(rest.body_json()["choices"][0]["finish_reason"], "length");
}

TEST(OpenAIServer, TokenizeDetokenize) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), server_engine());
  const HttpResult t = post(s.port(), "/tokenize", {{"prompt", "Once upon a time"}});
  ASSERT_EQ(t.status, 200) << t.body;
  const json tj = t.body_json();
  EXPECT_EQ(tj["count"], tj["tokens"].size());
  EXPECT_EQ(tj["max_model_len"], 256);
  EXPECT_EQ(tj["tokens"][0], 1);  // BOS
  const HttpResult d = post(s.port(), "/detokenize", {{"tokens", tj["tokens"]}});
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.body_json()["prompt"], "Once upon a time");
  // What these routes do not act on is refused by name, as on the generation routes.
  const HttpResult bogus =
      post(s.port(), "/tokenize", {{"prompt", "x"}, {"add_special_token", false}});
  EXPECT_EQ(bogus.status, 400);
  EXPECT_NE(bogus.body.find("unknown field 'add_special_token' for /tokenize (did you mean "
                            "'add_special_tokens'?)"),
            std::string::npos)
      << bogus.body;
  const HttpResult strs =
      post(s.port(), "/tokenize", {{"prompt", "x"}, {"return_token_strs", true}});
  EXPECT_EQ(strs.status, 400) << strs.body;
  const HttpResult detok = post(s.port(), "/detokenize", {{"tokens", {1}}, {"skip", true}});
  EXPECT_EQ(detok.status, 400);
  EXPECT_NE(detok.body.find("unknown field 'skip' for /detokenize"), std::string::npos)
      << detok.body;
}

TEST(OpenAIServer, MetricsPrometheusText) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), server_engine());
  ASSERT_EQ(post(s.port(), "/v1/completions",
                 {{"prompt", "Once"}, {"max_tokens", 5}, {"ignore_eos", true}})
                .status,
            200);
  ASSERT_EQ(post(s.port(), "/v1/completions",
                 {{"prompt", "Once"}, {"max_tokens", 5}, {"ignore_eos", true}})
                .status,
            200);
  const HttpResult r = get(s.port(), "/metrics");
  ASSERT_EQ(r.status, 200);
  const std::string& m = r.body;
  for (const char* name :
       {"tern:num_requests_running", "tern:num_requests_waiting", "tern:kv_cache_usage_perc",
        "tern:prompt_tokens_total", "tern:generation_tokens_total",
        "tern:prefix_cache_queries_total", "tern:prefix_cache_hits_total",
        "tern:num_preemptions_total", "tern:request_success_total",
        "tern:time_to_first_token_seconds", "tern:inter_token_latency_seconds",
        "tern:e2e_request_latency_seconds", "tern:request_queue_time_seconds",
        "tern:cache_config_info", "tern:kv_cache_capacity_tokens"}) {
    EXPECT_NE(m.find(std::string("# HELP ") + name + " "), std::string::npos) << name;
    EXPECT_NE(m.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
  }
  EXPECT_EQ(metric(m, gauge("tern:generation_tokens_total")), 10);
  EXPECT_NE(m.find("cache_dtype=\"f16\""), std::string::npos);
  EXPECT_EQ(
      metric(m, "tern:request_success_total{model_name=\"test-model\",finished_reason=\"length\"}"),
      2);
  EXPECT_EQ(metric(m, gauge("tern:time_to_first_token_seconds_count")), 2);
  EXPECT_EQ(metric(m, gauge("tern:inter_token_latency_seconds_count")), 8);  // 4 gaps each
  EXPECT_EQ(
      metric(m, "tern:time_to_first_token_seconds_bucket{model_name=\"test-model\",le=\"+Inf\"}"),
      2);
  EXPECT_EQ(
      metric(m, "tern:e2e_request_latency_seconds_bucket{model_name=\"test-model\",le=\"7680\"}"),
      2);
  // The second request found the first's prompt block? Too short for a full block: no hits.
  EXPECT_EQ(metric(m, gauge("tern:prefix_cache_hits_total")), 0);
  EXPECT_EQ(metric(m, gauge("tern:num_requests_running")), 0);
}

// A chat without max_tokens may take what the context leaves (vLLM's default for chat, unlike a
// completion's 16).
TEST(OpenAIServer, ChatDefaultMaxTokensIsWhatTheContextLeaves) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  TestServer s(tiny_chat_qwen3(), server_engine(64));
  const HttpResult r = post(s.port(), "/v1/chat/completions",
                            {{"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})},
                             {"temperature", 0},
                             {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body_json()["usage"]["total_tokens"], 64);
  EXPECT_GT(r.body_json()["usage"]["completion_tokens"], 16);
}

TEST(OpenAIServer, ChatCompletionStreamedAndNot) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  TestServer s(tiny_chat_qwen3(), server_engine());
  const json messages = json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hello"}}});
  const json body = {{"model", "test-model"}, {"messages", messages}, {"max_completion_tokens", 6},
                     {"temperature", 0},      {"ignore_eos", true},   {"logprobs", true},
                     {"top_logprobs", 3}};
  const HttpResult r = post(s.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.body_json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  ASSERT_EQ(choice["logprobs"]["content"].size(), 6u);
  for (const json& t : choice["logprobs"]["content"]) {
    EXPECT_EQ(t["top_logprobs"].size(), 3u);
    EXPECT_TRUE(t["bytes"].is_array());
  }

  // The prompt is the template's rendering, tokenized without a second BOS.
  const Tokenizer tok = testing::shared_tokenizer("qwen-tokenizer");
  const std::string rendered = ChatTemplate::from_tokenizer(tok).render(messages, true);
  EXPECT_EQ(j["usage"]["prompt_tokens"], tok.encode(rendered, false).size());
  const HttpResult t = post(s.port(), "/tokenize", {{"messages", messages}});
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(t.body_json()["tokens"], tok.encode(rendered, false));

  json streamed = body;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  const StreamResult st = stream(s.port(), "/v1/chat/completions", streamed);
  ASSERT_EQ(st.status, 200) << st.error_body;
  EXPECT_TRUE(st.done);
  ASSERT_GE(st.events.size(), 3u);
  EXPECT_EQ(st.events[0]["choices"][0]["delta"]["role"], "assistant");
  for (size_t i = 0; i + 1 < st.events.size(); ++i)
    EXPECT_EQ(st.events[i]["object"], "chat.completion.chunk");
  EXPECT_EQ(streamed_texts(st, 1)[0], choice["message"]["content"]);
  EXPECT_EQ(st.events.back()["usage"]["completion_tokens"], 6);

  // chat_template_kwargs reach the template (Qwen3's enable_thinking is not in this Qwen2.5
  // template, but an unknown kwarg must not break it).
  json kw = body;
  kw["chat_template_kwargs"] = {{"enable_thinking", false}};
  EXPECT_EQ(post(s.port(), "/v1/chat/completions", kw).status, 200);
}

// The chat role chunk comes with the request's first output, as vLLM sends it, not when the
// stream opens: a client that times the first chunk (every serving benchmark) measures the
// first token. B waits behind A (one sequence at a time) until A's client hangs up, so nothing
// of B may reach its client before then.
TEST(OpenAIServer, ChatRoleChunkComesWithTheFirstToken) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  EngineConfig config = server_engine(2048);
  config.scheduler.max_num_seqs = 1;
  TestServer s(tiny_chat_qwen3(), config);
  std::atomic<bool> a_streaming{false}, a_released{false};
  // A: a long completion whose client hangs up once released (its request is then aborted).
  std::thread a([&] {
    httplib::Client client("127.0.0.1", s.port());
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = json{
        {"model", "test-model"},
        {"prompt", "Hello"},
        {"max_tokens", 2000},
        {"ignore_eos", true},
        {"stream",
         true}}.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      a_streaming = true;
      return !a_released.load();
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    client.send(req, res, error);
  });
  while (!a_streaming) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  // B: a chat stream; what it receives, and whether A had been released when it began.
  std::atomic<bool> b_got_bytes{false};
  bool released_before_b = false;
  std::string b_body;
  std::thread b([&] {
    httplib::Client client("127.0.0.1", s.port());
    client.set_read_timeout(300, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = json{
        {"model", "test-model"},
        {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
        {"max_completion_tokens", 3},
        {"ignore_eos", true},
        {"stream",
         true}}.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
      if (!b_got_bytes) released_before_b = a_released.load();
      b_got_bytes = true;
      b_body.append(data, len);
      return true;
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    client.send(req, res, error);
  });
  // B is queued behind A ...
  for (int i = 0; i < 3000; ++i) {
    if (metric(get(s.port(), "/metrics").body, gauge("tern:num_requests_waiting")) == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // ... for longer than the stream's 100 ms wait, after which a role chunk sent when the
  // stream opened would have gone out (A decodes for seconds).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  a_released = true;
  a.join();
  b.join();
  EXPECT_TRUE(b_got_bytes);
  EXPECT_TRUE(released_before_b) << "B's stream began while it was still queued: " << b_body;
  // The role chunk still comes first, with the first token's chunk right behind it.
  const size_t role = b_body.find("\"role\":\"assistant\"");
  const size_t content = b_body.find("\"content\":", role + 1);
  EXPECT_LT(role, content) << b_body;
  EXPECT_NE(b_body.find("data: [DONE]"), std::string::npos) << b_body;
}

}  // namespace
}  // namespace tern::testing
