// A tern pod as the llm-d / Gateway API Inference Extension stack sees it, each part played
// from its documented behaviour: the endpoint picker scraping /metrics under a burst
// (endpoint_picker.py, with prometheus_client's parser), a prefix-aware router indexing the
// pod's KV cache events (kv_events_subscriber.py, with pyzmq and msgpack), and the EPP's token
// producer calling the render routes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "http/raw_client.h"
#include "server/server_test_util.h"

namespace tern::testing {
namespace {

// Debian's interpreter: its python3-prometheus-client, -zmq and -msgpack (install-deps.sh).
constexpr const char* kPython = "/usr/bin/python3";

void expect_script_passes(const std::string& script, const std::vector<std::string>& args,
                          const std::string& ok_line) {
  std::vector<std::string> argv = {std::string(TERN_SOURCE_DIR) + "/tests/server/" + script};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult r = run_process(kPython, argv);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(ok_line), std::string::npos) << r.out << r.err;
  std::printf("%s", r.out.c_str());
}

TEST(LlmdStack, EndpointPickerScrapesVllmMetricsUnderABurst) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  EngineConfig config = server_engine(512);
  config.scheduler.max_num_seqs = 4;  // 16 streams: 12 wait
  TestServer s(stories260k(), config);
  const int64_t blocks = s.llm().engine().stats().num_blocks;
  // 480 tokens each (of the 512 a sequence may hold): stories260K decodes so fast that a burst
  // of 128-token streams was over within four 50 ms scrapes.
  expect_script_passes(
      "endpoint_picker.py",
      {std::to_string(s.port()), "test-model", std::to_string(blocks), "16", "480"},
      "endpoint picker: ok");
}

TEST(LlmdStack, RoutersIndexFollowsTheKvCacheEvents) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  server::ServerOptions options;
  const std::string base = "ipc:///tmp/tern-kv-events-" + std::to_string(::getpid());
  options.kv_events.enabled = true;
  options.kv_events.endpoint = base + "-pub";
  options.kv_events.replay_endpoint = base + "-replay";
  options.kv_events.topic = "kv@127.0.0.1@test-model";
  TestServer s(stories260k(), server_engine(512), options);
  expect_script_passes("kv_events_subscriber.py",
                       {std::to_string(s.port()), options.kv_events.endpoint,
                        options.kv_events.replay_endpoint, options.kv_events.topic},
                       "kv events subscriber: ok");
  // While a request holds blocks the cache cannot be emptied.
  json body = {
      {"prompt", "Once upon a time"}, {"max_tokens", 200}, {"ignore_eos", true}, {"stream", true}};
  std::thread long_request([&] { stream(s.port(), "/v1/completions", body); });
  for (int i = 0;
       i < 500 && metric(get(s.port(), "/metrics").body, gauge("vllm:num_requests_running")) != 1;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const HttpResult busy = post(s.port(), "/reset_prefix_cache", json::object());
  long_request.join();
  EXPECT_EQ(busy.status, 409) << busy.body;
  EXPECT_EQ(post(s.port(), "/reset_prefix_cache", json::object()).status, 200);
  // As curl -X POST sends it: no body, no Content-Length (the route needs none).
  RawClient bare(s.port());
  ASSERT_TRUE(bare.send("POST /reset_prefix_cache HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string answer = bare.read(std::chrono::seconds(10), "\r\n\r\n");
  EXPECT_EQ(status_of(answer), 200) << answer;
}

TEST(LlmdStack, KvEventsNeedThePrefixCache) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  server::ServerOptions options;
  options.kv_events.enabled = true;
  options.kv_events.endpoint = "ipc:///tmp/tern-kv-events-off-" + std::to_string(::getpid());
  EngineConfig config = server_engine();
  config.enable_prefix_caching = false;
  try {
    TestServer s(stories260k(), config, options);
    ADD_FAILURE() << "started without a prefix cache";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--no-enable-prefix-caching"), std::string::npos)
        << e.what();
  }
}

// 20 chat requests: the tokens /v1/chat/completions/render gives are /tokenize's, and those
// generation runs (the usage's prompt_tokens).
TEST(LlmdStack, RenderGivesTheTokensGenerationRuns) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  server::ServerOptions options;
  options.tool_call_parser = "hermes";
  options.enable_auto_tool_choice = true;
  TestServer s(tiny_chat_qwen3(), server_engine(), options);
  const json conversations[] = {
      json::array({{{"role", "user"}, {"content", "Hello"}}}),
      json::array({{{"role", "system"}, {"content", "Be brief."}},
                   {{"role", "user"}, {"content", "What is a KV cache?"}}}),
      json::array({{{"role", "user"}, {"content", "Hi"}},
                   {{"role", "assistant"}, {"content", "Hello! How can I help?"}},
                   {{"role", "user"}, {"content", "Tell me a story about a cat."}}}),
      json::array({{{"role", "user"},
                    {"content", json::array({{{"type", "text"}, {"text", "Two "}},
                                             {{"type", "text"}, {"text", "parts"}}})}}}),
      json::array({{{"role", "user"}, {"content", "Unicode: 日本語, émoji 🙂, <tag>"}}}),
  };
  const json tools = json::array({{{"type", "function"},
                                   {"function",
                                    {{"name", "get_weather"},
                                     {"description", "Weather of a city"},
                                     {"parameters",
                                      {{"type", "object"},
                                       {"properties", {{"city", {{"type", "string"}}}}},
                                       {"required", {"city"}}}}}}}});
  int cases = 0;
  for (const json& messages : conversations) {
    for (int variant = 0; variant < 4; ++variant) {
      json body = {{"model", "test-model"}, {"messages", messages}};
      if (variant == 1) body["add_generation_prompt"] = false;
      if (variant == 2) body["chat_template_kwargs"] = {{"enable_thinking", false}};
      if (variant == 3) body["tools"] = tools;
      const HttpResult tokenized = post(s.port(), "/tokenize", body);
      ASSERT_EQ(tokenized.status, 200) << tokenized.body;
      json generation = body;
      generation["max_tokens"] = 1;
      const HttpResult rendered = post(s.port(), "/v1/chat/completions/render", generation);
      ASSERT_EQ(rendered.status, 200) << rendered.body;
      const json r = rendered.body_json();
      EXPECT_EQ(r["token_ids"], tokenized.body_json()["tokens"]) << body;
      EXPECT_TRUE(r["features"].is_null());
      EXPECT_EQ(r["model"], "test-model");
      const HttpResult generated = post(s.port(), "/v1/chat/completions", generation);
      ASSERT_EQ(generated.status, 200) << generated.body;
      EXPECT_EQ(generated.body_json()["usage"]["prompt_tokens"], r["token_ids"].size()) << body;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 20);

  // Completions: one rendered prompt per prompt, a list as vLLM answers; errors as generation's.
  const HttpResult list = post(s.port(), "/v1/completions/render",
                               {{"prompt", json::array({"Hello world", "Bonjour"})}});
  ASSERT_EQ(list.status, 200) << list.body;
  ASSERT_EQ(list.body_json().size(), 2u);
  EXPECT_EQ(list.body_json()[1]["token_ids"],
            post(s.port(), "/tokenize", {{"prompt", "Bonjour"}}).body_json()["tokens"]);
  const HttpResult ids = post(s.port(), "/v1/completions/render", {{"prompt", {5, 6, 7}}});
  EXPECT_EQ(ids.body_json()[0]["token_ids"], json({5, 6, 7}));
  const HttpResult bad = post(s.port(), "/v1/completions/render", {{"prompt", "x"}, {"top_q", 1}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("top_q"), std::string::npos) << bad.body;
  EXPECT_EQ(
      post(s.port(), "/v1/chat/completions/render", {{"model", "other"}, {"messages", {}}}).status,
      404);
}

}  // namespace
}  // namespace tern::testing
