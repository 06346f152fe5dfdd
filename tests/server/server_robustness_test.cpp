// `tern serve` under load and abuse: 32 concurrent seeded streams equal to the offline API,
// 30+ malformed or hostile requests each answered 4xx while good requests beside them finish
// correctly, clients that hang up mid-stream (their KV is freed), API keys, body limits, and a
// SIGTERM drain of the real binary.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <regex>

#include "run_process.h"
#include "server/server_test_util.h"

namespace tern::testing {
namespace {

TEST(ServerRobustness, ConcurrentSeededStreamsEqualOfflineOutputs) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const int kClients = 32;
  std::vector<std::string> prompts;
  std::vector<SamplingParams> params;
  for (int i = 0; i < kClients; ++i) {
    prompts.push_back(i % 3 == 0   ? "Once upon a time"
                      : i % 3 == 1 ? "The little dog"
                                   : "Lily and Tom went");
    SamplingParams p;
    p.temperature = 0.9f;
    p.top_p = 0.95f;
    p.seed = 1000 + static_cast<uint64_t>(i);
    p.max_tokens = 16 + i % 8;
    params.push_back(p);
  }
  LLM offline(stories260k(), server_engine());
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& p : prompts) ids.push_back(offline.tokenizer().encode(p));
  const std::vector<RequestOutput> expected = offline.generate(ids, params);

  TestServer s(stories260k(), server_engine());
  std::vector<std::future<StreamResult>> clients;
  for (int i = 0; i < kClients; ++i)
    clients.push_back(std::async(std::launch::async, [&, i] {
      return stream(s.port(), "/v1/completions",
                    {{"prompt", prompts[i]},
                     {"temperature", 0.9},
                     {"top_p", 0.95},
                     {"seed", 1000 + i},
                     {"max_tokens", params[i].max_tokens},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}}});
    }));
  for (int i = 0; i < kClients; ++i) {
    const StreamResult r = clients[i].get();
    ASSERT_EQ(r.status, 200) << "client " << i << ": " << r.error_body << " events "
                             << r.events.size();
    EXPECT_TRUE(r.done) << "client " << i;
    EXPECT_EQ(streamed_texts(r, 1)[0], expected[i].outputs[0].text) << "client " << i;
    EXPECT_EQ(r.events.back()["usage"]["completion_tokens"],
              expected[i].outputs[0].token_ids.size())
        << "client " << i;
  }
  wait_until_idle(s.port());
}

struct Hostile {
  std::string what;
  std::string method;
  std::string path;
  std::string body;
  int status;
};

std::vector<Hostile> hostile_requests() {
  const std::string c = "/v1/completions", chat = "/v1/chat/completions";
  return {
      {"malformed JSON", "POST", c, "{\"prompt\": \"x\",", 400},
      {"not JSON at all", "POST", c, "hello", 400},
      {"empty body", "POST", c, "", 400},
      {"JSON array body", "POST", c, "[1, 2]", 400},
      {"JSON string body", "POST", c, "\"prompt\"", 400},
      {"missing prompt", "POST", c, R"({"max_tokens": 4})", 400},
      {"prompt is a number", "POST", c, R"({"prompt": 42})", 400},
      {"prompt is an object", "POST", c, R"({"prompt": {"a": 1}})", 400},
      {"empty prompt list", "POST", c, R"({"prompt": []})", 400},
      {"token id out of vocabulary", "POST", c, R"({"prompt": [1, 999999]})", 400},
      {"negative token id", "POST", c, R"({"prompt": [1, -5]})", 400},
      {"mixed prompt list", "POST", c, R"({"prompt": ["a", {"b": 1}]})", 400},
      {"unknown model", "POST", c, R"({"prompt": "x", "model": "gpt-4"})", 404},
      {"model is a number", "POST", c, R"({"prompt": "x", "model": 3})", 400},
      {"max_tokens 0", "POST", c, R"({"prompt": "x", "max_tokens": 0})", 400},
      {"max_tokens negative", "POST", c, R"({"prompt": "x", "max_tokens": -3})", 400},
      {"max_tokens a string", "POST", c, R"({"prompt": "x", "max_tokens": "ten"})", 400},
      {"max_tokens huge", "POST", c, R"({"prompt": "x", "max_tokens": 100000000000})", 400},
      {"prompt + max_tokens over the context", "POST", c, R"({"prompt": "x", "max_tokens": 300})",
       400},
      {"prompt longer than the context", "POST", c,
       "{\"prompt\": [" +
           [] {
             std::string s = "1";
             for (int i = 0; i < 400; ++i) s += ",5";
             return s;
           }() +
           "]}",
       400},
      {"absurd n", "POST", c, R"({"prompt": "x", "n": 100000})", 400},
      {"n zero", "POST", c, R"({"prompt": "x", "n": 0})", 400},
      {"n a float", "POST", c, R"({"prompt": "x", "n": 1.5})", 400},
      {"temperature negative", "POST", c, R"({"prompt": "x", "temperature": -1})", 400},
      {"temperature a string", "POST", c, R"({"prompt": "x", "temperature": "hot"})", 400},
      {"top_p zero", "POST", c, R"({"prompt": "x", "top_p": 0})", 400},
      {"top_p above one", "POST", c, R"({"prompt": "x", "top_p": 1.5})", 400},
      {"top_k below -1", "POST", c, R"({"prompt": "x", "top_k": -7})", 400},
      {"min_p above one", "POST", c, R"({"prompt": "x", "min_p": 2})", 400},
      {"presence_penalty out of range", "POST", c, R"({"prompt": "x", "presence_penalty": 9})",
       400},
      {"repetition_penalty zero", "POST", c, R"({"prompt": "x", "repetition_penalty": 0})", 400},
      {"logprobs too many", "POST", c, R"({"prompt": "x", "logprobs": 1000})", 400},
      {"stop of numbers", "POST", c, R"({"prompt": "x", "stop": [1, 2]})", 400},
      {"empty stop string", "POST", c, R"({"prompt": "x", "stop": [""]})", 400},
      {"stream not a bool", "POST", c, R"({"prompt": "x", "stream": "yes"})", 400},
      {"stream_options with an unknown key", "POST", c,
       R"({"prompt": "x", "stream": true, "stream_options": {"continuous": true}})", 400},
      {"stop_token_ids outside the vocabulary", "POST", c,
       R"({"prompt": "x", "stop_token_ids": [99999999]})", 400},
      {"max_tokens of 2**64", "POST", c, R"({"prompt": "x", "max_tokens": 18446744073709551616})",
       400},
      {"max_tokens of 2**63", "POST", c, R"({"prompt": "x", "max_tokens": 9223372036854775808})",
       400},
      {"stream_options without stream", "POST", c,
       R"({"prompt": "x", "stream_options": {"include_usage": true}})", 400},
      {"min_tokens over max_tokens", "POST", c,
       R"({"prompt": "x", "max_tokens": 2, "min_tokens": 5})", 400},
      {"echo", "POST", c, R"({"prompt": "x", "echo": true})", 400},
      {"chat without a template", "POST", chat,
       R"({"messages": [{"role": "user", "content": "hi"}]})", 400},
      {"chat empty messages", "POST", chat, R"({"messages": []})", 400},
      {"chat messages not a list", "POST", chat, R"({"messages": "hi"})", 400},
      {"chat message without role", "POST", chat, R"({"messages": [{"content": "hi"}]})", 400},
      {"chat missing messages", "POST", chat, R"({"max_tokens": 3})", 400},
      {"chat top_logprobs without logprobs", "POST", chat,
       R"({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2})", 400},
      {"detokenize out of vocabulary", "POST", "/detokenize", R"({"tokens": [1, 99999999]})", 400},
      {"tokenize without prompt", "POST", "/tokenize", R"({"text": "x"})", 400},
      {"unknown route", "GET", "/v1/engines", "", 404},
      {"unknown POST route", "POST", "/v2/completions", "{}", 404},
      {"wrong method on completions", "GET", c, "", 405},
      {"wrong method on models", "POST", "/v1/models", "{}", 405},
      {"DELETE on chat", "DELETE", chat, "", 405},
  };
}

TEST(ServerRobustness, HostileRequestsGet4xxWhileGoodOnesFinish) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), server_engine());
  const json good = {
      {"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}};
  const std::string expected =
      post(s.port(), "/v1/completions", good).body_json()["choices"][0]["text"];

  std::vector<std::future<StreamResult>> streams;
  std::vector<std::future<HttpResult>> plain;
  for (int i = 0; i < 3; ++i) {
    json g = good;
    g["stream"] = true;
    streams.push_back(
        std::async(std::launch::async, [&, g] { return stream(s.port(), "/v1/completions", g); }));
    plain.push_back(
        std::async(std::launch::async, [&] { return post(s.port(), "/v1/completions", good); }));
  }
  const std::vector<Hostile> hostile = hostile_requests();
  ASSERT_GE(hostile.size(), 30u);
  for (const Hostile& h : hostile) {
    const HttpResult r = http_request(s.port(), h.method, h.path, h.body);
    EXPECT_EQ(r.status, h.status) << h.what << ": " << r.body;
    ASSERT_FALSE(r.body.empty()) << h.what;
    const json e = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(e.is_object() && e.contains("error")) << h.what << ": " << r.body;
    EXPECT_TRUE(e["error"]["message"].is_string()) << h.what;
    EXPECT_TRUE(e["error"]["type"].is_string()) << h.what;
    EXPECT_EQ(e["error"]["code"], h.status) << h.what;
    EXPECT_TRUE(e["error"].contains("param")) << h.what;
  }
  for (auto& f : streams) {
    const StreamResult r = f.get();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(streamed_texts(r, 1)[0], expected);
  }
  for (auto& f : plain) {
    const HttpResult r = f.get();
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.body_json()["choices"][0]["text"], expected);
  }
  // The param names the field for range errors, as vLLM's does.
  const HttpResult top_p = post(s.port(), "/v1/completions", {{"prompt", "x"}, {"top_p", 2}});
  EXPECT_EQ(top_p.body_json()["error"]["param"], "top_p");
  const HttpResult ctx = post(s.port(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", 300}});
  EXPECT_NE(ctx.body_json()["error"]["message"].get<std::string>().find(
                "maximum context length is 256 tokens"),
            std::string::npos);
  wait_until_idle(s.port());
}

TEST(ServerRobustness, ClientThatHangsUpMidStreamIsAbortedAndFreesItsKv) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  // A long generation (ignore_eos to the end of a 4096-token context) that only the hang-up ends.
  TestServer s(tiny_chat_qwen3(), server_engine(4096));
  std::vector<std::future<StreamResult>> clients;
  for (int i = 0; i < 4; ++i)
    clients.push_back(std::async(std::launch::async, [&] {
      return stream(s.port(), "/v1/completions",
                    {{"prompt", "Hello there"}, {"ignore_eos", true}, {"stream", true}},
                    /*stop_after=*/3);
    }));
  for (auto& c : clients) EXPECT_EQ(c.get().events.size(), 3u);
  wait_until_idle(s.port());
  const std::string m = get(s.port(), "/metrics").body;
  EXPECT_EQ(
      metric(m, "tern:request_success_total{model_name=\"test-model\",finished_reason=\"abort\"}"),
      4);
  EXPECT_LT(metric(m, gauge("tern:generation_tokens_total")), 4 * 4000);
  EXPECT_EQ(s.server().num_unfinished_requests(), 0);
}

TEST(ServerRobustness, ApiKeyAndBodyLimit) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  server::ServerOptions o;
  o.api_key = "sekret";
  o.max_request_body = 4096;
  TestServer s(stories260k(), server_engine(), o);
  const json body = {{"prompt", "Once"}, {"max_tokens", 2}};
  EXPECT_EQ(post(s.port(), "/v1/completions", body).status, 401);
  EXPECT_EQ(post(s.port(), "/v1/completions", body, {{"Authorization", "Bearer wrong"}}).status,
            401);
  EXPECT_EQ(get(s.port(), "/v1/models").status, 401);
  const HttpResult unauthorized = get(s.port(), "/v1/models", {{"Authorization", "sekret"}});
  EXPECT_EQ(unauthorized.status, 401);
  EXPECT_EQ(unauthorized.body_json()["error"]["code"], 401);
  EXPECT_EQ(post(s.port(), "/v1/completions", body, {{"Authorization", "Bearer sekret"}}).status,
            200);
  EXPECT_EQ(get(s.port(), "/v1/models", {{"Authorization", "Bearer sekret"}}).status, 200);
  EXPECT_EQ(get(s.port(), "/health").status, 200);  // probes need no key, as in vLLM
  const HttpResult big = post(s.port(), "/v1/completions", {{"prompt", std::string(10000, 'a')}},
                              {{"Authorization", "Bearer sekret"}});
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(big.body_json()["error"]["code"], 413);
}

// The real binary: start it on port 0, read the port from its log, stream, SIGTERM → exit 0.
TEST(ServerRobustness, SigtermDrainsAndExitsZero) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  ServeProcess server({fixture("stories260K/stories260K.gguf"), "--max-model-len", "256",
                       "--kv-cache-memory", "16MiB", "--threads", "1", "--served-model-name",
                       "test-model"});
  const int port = server.port();
  ASSERT_GT(port, 0) << "the server did not start";
  ASSERT_EQ(post(port, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 3}}).status, 200);
  // A stream in flight when the signal comes ends (abort or length) with [DONE].
  auto in_flight = std::async(std::launch::async, [&] {
    return stream(
        port, "/v1/completions",
        {{"prompt", "Once"}, {"max_tokens", 250}, {"ignore_eos", true}, {"stream", true}});
  });
  for (int i = 0; i < 3000; ++i) {
    const std::string m = get(port, "/metrics").body;
    if (metric(m, gauge("tern:generation_tokens_total")) > 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const int status = server.kill_and_wait(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const StreamResult r = in_flight.get();
  EXPECT_EQ(r.status, 200);
  // After the drain nothing listens any more.
  EXPECT_EQ(get(port, "/health").status, -1);
}

}  // namespace
}  // namespace tern::testing
