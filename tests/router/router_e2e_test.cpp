// tern router in front of real tern serve instances (stories260K, in process): replicas, and
// prefill/decode pairs, give through the router what the instances give on their own.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "router/router_test_util.h"

namespace tern::testing {
namespace {

// An engine of tern serve --role prefill / decode, its KV transfer on any free port.
EngineConfig router_with_role(disagg::KvRole role) {
  EngineConfig c = server_engine(512);
  c.kv_transfer.role = role;
  c.kv_transfer.port = 0;
  return c;
}

TEST(RouterEndToEnd, ReplicasThroughTheRouterMatchTheBackends) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s1(stories260k(), server_engine());
  TestServer s2(stories260k(), server_engine());
  router::RouterOptions o;
  o.backend_urls = {"http://127.0.0.1:" + std::to_string(s1.port()),
                    "http://127.0.0.1:" + std::to_string(s2.port())};
  o.policy = "round_robin";
  TestRouter router(o);

  const json request = {{"model", "test-model"},
                        {"prompt", "Once upon a time"},
                        {"max_tokens", 24},
                        {"temperature", 0}};
  const HttpResult direct = post(s1.port(), "/v1/completions", request);
  ASSERT_EQ(direct.status, 200) << direct.body;
  const std::string expected = direct.body_json()["choices"][0]["text"];
  ASSERT_FALSE(expected.empty());

  // Round robin: the two go to different replicas, both must answer the same.
  for (int i = 0; i < 2; ++i) {
    const HttpResult r = post(router.port(), "/v1/completions", request);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body_json()["choices"][0]["text"], expected) << "request " << i;
    EXPECT_EQ(r.body_json()["usage"], direct.body_json()["usage"]);
  }
  json streamed = request;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  for (int i = 0; i < 2; ++i) {
    const StreamResult st = stream(router.port(), "/v1/completions", streamed);
    ASSERT_EQ(st.status, 200) << st.error_body;
    EXPECT_TRUE(st.done);
    EXPECT_EQ(streamed_texts(st, 1)[0], expected) << "stream " << i;
    EXPECT_EQ(st.events.back()["usage"]["completion_tokens"],
              direct.body_json()["usage"]["completion_tokens"]);
  }
  const std::string m = get(router.port(), "/metrics").body;
  for (const std::string& url : o.backend_urls)
    EXPECT_EQ(metric(m, "tern_router:requests_total{role=\"replica\",backend=\"" + url +
                            "\",status=\"200\"}"),
              2)
        << m;
  // The routes a client needs besides generation.
  const HttpResult models = get(router.port(), "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.body_json()["data"][0]["id"], "test-model");
  EXPECT_EQ(get(router.port(), "/health").status, 200);
  const HttpResult missing = get(router.port(), "/v1/nothing");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body_json()["error"]["code"], 404);
  // A backend's own 4xx comes back as it was.
  const HttpResult bad = post(router.port(), "/v1/completions", {{"prompt", "x"}, {"top_p", 2}});
  const HttpResult bad_direct = post(s1.port(), "/v1/completions", {{"prompt", "x"}, {"top_p", 2}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body, bad_direct.body);
  wait_until_idle(s1.port());
  wait_until_idle(s2.port());
}

// The whole flow with real instances: tern serve --role prefill and --role decode (stories260K,
// in process) behind the router give what one instance gives, greedy and seeded, streamed and
// not, with concurrent clients; afterwards no block is held on either side.
TEST(RouterEndToEnd, PrefillAndDecodeInstancesThroughTheRouterMatchOneInstance) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer p(stories260k(), router_with_role(disagg::KvRole::kProducer));
  TestServer d(stories260k(), router_with_role(disagg::KvRole::kConsumer));
  TestServer one(stories260k(), server_engine(512));
  router::RouterOptions o;
  o.prefill_urls = {"http://127.0.0.1:" + std::to_string(p.port())};
  o.decode_urls = {"http://127.0.0.1:" + std::to_string(d.port())};
  o.health_check_interval = 3600;
  TestRouter router(o);

  std::vector<std::thread> clients;
  std::atomic<int> same{0};
  constexpr int kClients = 8;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      std::string prompt = "Once upon a time";
      for (int k = 0; k < i; ++k) prompt += " there was a little girl named Lily";
      json request = {{"model", "test-model"},
                      {"prompt", prompt},
                      {"max_tokens", 16},
                      {"logprobs", 1},
                      {"ignore_eos", true}};
      if (i % 2) {
        request["temperature"] = 0.8;
        request["seed"] = 100 + i;
      } else {
        request["temperature"] = 0;
      }
      const HttpResult want = post(one.port(), "/v1/completions", request);
      if (i % 3 == 0) {
        json streamed = request;
        streamed["stream"] = true;
        const StreamResult got = stream(router.port(), "/v1/completions", streamed);
        EXPECT_EQ(got.status, 200) << got.error_body;
        if (streamed_texts(got, 1)[0] == want.body_json()["choices"][0]["text"]) ++same;
      } else {
        const HttpResult got = post(router.port(), "/v1/completions", request);
        EXPECT_EQ(got.status, 200) << got.body;
        if (got.status == 200 &&
            got.body_json()["choices"][0]["text"] == want.body_json()["choices"][0]["text"] &&
            got.body_json()["choices"][0]["logprobs"] == want.body_json()["choices"][0]["logprobs"])
          ++same;
      }
    });
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(same.load(), kClients);
  // n completions and min_tokens are the decode side's business (the prefill makes one token).
  const json several = {
      {"model", "test-model"}, {"prompt", "Once upon a time"}, {"max_tokens", 12}, {"n", 3},
      {"min_tokens", 6},       {"temperature", 0.9},           {"seed", 7}};
  const HttpResult want = post(one.port(), "/v1/completions", several);
  const HttpResult got = post(router.port(), "/v1/completions", several);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body_json()["choices"], want.body_json()["choices"]);
  wait_until_idle(p.port());
  wait_until_idle(d.port());
  EXPECT_EQ(metric(get(p.port(), "/metrics").body, gauge("tern:kv_transfer_leases_held")), 0);
  EXPECT_GT(metric(get(d.port(), "/metrics").body, gauge("tern:kv_transfer_received_blocks_total")),
            0);
}

// --disagg-min-prompt-tokens: a prompt shorter than it goes straight to the decode instance,
// which prefills it itself; a longer one takes the two-step flow. Both give what one instance
// gives, and the prefill instance leases blocks only for the long ones.
TEST(RouterEndToEnd, ShortPromptsArePrefilledByTheDecodeInstance) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  server::ServerOptions chat;  // stories260K has no chat template of its own
  chat.chat_template =
      "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:";
  TestServer p(stories260k(), router_with_role(disagg::KvRole::kProducer), chat);
  TestServer d(stories260k(), router_with_role(disagg::KvRole::kConsumer), chat);
  TestServer one(stories260k(), server_engine(512), chat);
  router::RouterOptions o;
  o.prefill_urls = {"http://127.0.0.1:" + std::to_string(p.port())};
  o.decode_urls = {"http://127.0.0.1:" + std::to_string(d.port())};
  o.health_check_interval = 3600;
  o.disagg_min_prompt_tokens = 24;
  TestRouter router(o);

  std::string long_prompt = "Once upon a time";
  for (int k = 0; k < 4; ++k) long_prompt += " there was a little girl named Lily";
  const json short_ids = {{"model", "test-model"}, {"prompt", {1, 415, 201, 263, 31}}};
  const std::vector<json> requests = {
      {{"model", "test-model"}, {"prompt", "Once upon a time"}},  // short
      short_ids,
      {{"model", "test-model"}, {"prompt", long_prompt}},  // long
  };
  for (json r : requests) {
    r["max_tokens"] = 12;
    r["temperature"] = 0;
    r["logprobs"] = 1;
    r["ignore_eos"] = true;
    const HttpResult want = post(one.port(), "/v1/completions", r);
    ASSERT_EQ(want.status, 200) << want.body;
    const HttpResult got = post(router.port(), "/v1/completions", r);
    ASSERT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(got.body_json()["choices"], want.body_json()["choices"]) << r.dump();
  }
  // A chat is counted as its template renders it: a short one stays on the decode instance.
  const json conversation = {{"model", "test-model"},
                             {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                             {"max_tokens", 4},
                             {"temperature", 0}};
  const HttpResult want = post(one.port(), "/v1/chat/completions", conversation);
  ASSERT_EQ(want.status, 200) << want.body;
  const HttpResult got = post(router.port(), "/v1/chat/completions", conversation);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body_json()["choices"], want.body_json()["choices"]);

  EXPECT_EQ(metric(get(router.port(), "/metrics").body, "tern_router:prefilled_on_decode_total"),
            3);
  EXPECT_EQ(metric(get(p.port(), "/metrics").body, gauge("tern:kv_transfer_leases_granted_total")),
            1);
  wait_until_idle(p.port());
  wait_until_idle(d.port());
}

}  // namespace
}  // namespace tern::testing
