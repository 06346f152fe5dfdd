// tern router against fake backends on loopback: the two-step prefill/decode bodies, streams
// relayed chunk by chunk, errors passed through, 502 / 503, the policies over HTTP, health
// checks taking a backend out and back, /metrics, and client disconnects reaching the backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>

#include "router/router_test_util.h"

namespace tern::testing {
namespace {

const httplib::Headers kAuth = {{"Authorization", "Bearer sk-test"}};

std::vector<std::string> answered_by(int port, int n, const std::string& prompt = "hi") {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    const HttpResult r = post(port, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 4}});
    EXPECT_EQ(r.status, 200) << r.body;
    names.push_back(r.status == 200 ? r.body_json().value("backend", "?") : "error");
  }
  return names;
}

TEST(RouterDisagg, TwoStepBodiesAndAuthorization) {
  FakeBackend p(prefill());
  FakeBackend d(replica("decode"));
  TestRouter router(disaggregated(p, d));
  const json client = {{"model", "m"},     {"prompt", "Once upon a time"},
                       {"max_tokens", 20}, {"temperature", 0},
                       {"stream", true},   {"stream_options", {{"include_usage", true}}}};
  const StreamResult s = stream(router.port(), "/v1/completions", client, 0, kAuth);
  ASSERT_EQ(s.status, 200) << s.error_body;
  EXPECT_TRUE(s.done);
  ASSERT_EQ(s.events.size(), 3u);
  EXPECT_EQ(s.events[0]["backend"], "decode");

  ASSERT_EQ(p.bodies().size(), 1u);
  json expected_prefill = client;
  expected_prefill["max_tokens"] = 1;
  expected_prefill["stream"] = false;
  expected_prefill.erase("stream_options");
  expected_prefill["kv_transfer_params"] = {{"do_remote_decode", true}};
  EXPECT_EQ(p.bodies()[0], expected_prefill);
  ASSERT_EQ(d.bodies().size(), 1u);
  json expected_decode = client;
  expected_decode["kv_transfer_params"] = fake_kv_transfer_params();
  EXPECT_EQ(d.bodies()[0], expected_decode);
  EXPECT_EQ(p.authorizations()[0], "Bearer sk-test");
  EXPECT_EQ(d.authorizations()[0], "Bearer sk-test");

  // Chat, not streamed: max_completion_tokens is capped too; the answer comes back whole.
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"max_completion_tokens", 30}};
  const HttpResult r = post(router.port(), "/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body_json()["backend"], "decode");
  EXPECT_EQ(p.bodies()[1]["max_tokens"], 1);
  EXPECT_EQ(p.bodies()[1]["max_completion_tokens"], 1);
  EXPECT_EQ(p.bodies()[1]["stream"], false);
  json expected_chat = chat;
  expected_chat["kv_transfer_params"] = fake_kv_transfer_params();
  EXPECT_EQ(d.bodies()[1], expected_chat);
  EXPECT_EQ(d.authorizations()[1], "");  // none given, none made up
}

// A decode instance that sends its chunks one at a time, each only after the client has seen
// the one before: a router that buffered the stream would never see the second one asked for.
struct Lockstep {
  std::mutex mutex;
  std::condition_variable cv;
  int received = 0;  // events the client has seen
  bool stalled = false;
  std::string sent;  // every byte the fake wrote

  void client_saw(int events) {
    std::lock_guard lock(mutex);
    received = events;
    cv.notify_all();
  }
};

TEST(RouterDisagg, StreamIsRelayedChunkByChunkUnchanged) {
  auto step = std::make_shared<Lockstep>();
  constexpr int kChunks = 6;
  FakeBackend p(prefill());
  FakeBackend d([step](const httplib::Request&, httplib::Response& res) {
    auto next = std::make_shared<int>(0);
    res.set_chunked_content_provider(
        "text/event-stream", [step, next](size_t, httplib::DataSink& sink) {
          if (*next > 0) {
            std::unique_lock lock(step->mutex);
            // Not a latency bound: only a way out of the deadlock a buffering router would cause.
            if (!step->cv.wait_for(lock, std::chrono::seconds(20),
                                   [&] { return step->received >= *next; }))
              step->stalled = true;
          }
          std::string chunk = *next < kChunks ? sse_event({{"i", *next},
                                                           {"text", " tok\xc3\xa9n"},
                                                           {"pad", std::string(*next * 97, 'x')}})
                                              : std::string("data: [DONE]\n\n");
          {
            std::lock_guard lock(step->mutex);
            step->sent += chunk;
          }
          if (!sink.write(chunk.data(), chunk.size())) return false;
          if (++*next > kChunks) sink.done();
          return true;
        });
  });
  TestRouter router(disaggregated(p, d));

  httplib::Client client("127.0.0.1", router.port());
  client.set_read_timeout(60, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = json{{"prompt", "x"}, {"stream", true}}.dump();
  req.set_header("Content-Type", "application/json");
  std::string received;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    received.append(data, len);
    int events = 0;
    for (size_t at = 0; (at = received.find("\n\n", at)) != std::string::npos; at += 2) ++events;
    step->client_saw(events);
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  ASSERT_TRUE(client.send(req, res, error)) << httplib::to_string(error);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.get_header_value("Content-Type"), "text/event-stream");
  EXPECT_FALSE(step->stalled) << "the router held a chunk back until the stream went on";
  EXPECT_EQ(received, step->sent);  // byte for byte
}

TEST(RouterDisagg, ConcurrentStreamsAllComeThrough) {
  FakeBackend p1(prefill()), p2(prefill());
  FakeBackend d1(replica("d1")), d2(replica("d2"));
  router::RouterOptions o;
  o.prefill_urls = {p1.url(), p2.url()};
  o.decode_urls = {d1.url(), d2.url()};
  o.policy = "least_outstanding";
  o.health_check_interval = 3600;
  TestRouter router(o);
  constexpr int kClients = 16;
  std::vector<StreamResult> results(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      results[i] = stream(router.port(), "/v1/completions",
                          {{"prompt", "client " + std::to_string(i)}, {"stream", true}});
    });
  for (std::thread& t : clients) t.join();
  for (const StreamResult& r : results) {
    EXPECT_EQ(r.status, 200) << r.error_body;
    EXPECT_TRUE(r.done);
    EXPECT_EQ(r.events.size(), 3u);
  }
  EXPECT_EQ(p1.num_requests() + p2.num_requests(), size_t{kClients});
  EXPECT_EQ(d1.num_requests() + d2.num_requests(), size_t{kClients});
  // Every decode body carries its own prompt: no mix-up between concurrent requests.
  std::vector<std::string> prompts;
  for (const FakeBackend* d : {&d1, &d2})
    for (const json& b : d->bodies()) prompts.push_back(b["prompt"]);
  std::sort(prompts.begin(), prompts.end());
  EXPECT_EQ(std::unique(prompts.begin(), prompts.end()), prompts.end());
  // A stream's count ends when its response is torn down, just after the client has it all.
  EXPECT_TRUE(eventually([&] {
    const std::string m = get(router.port(), "/metrics").body;
    return metric(m, "tern_router:request_seconds_count") == kClients &&
           metric(m, backend_series("tern_router:requests_in_flight", "decode", d1)) == 0 &&
           metric(m, backend_series("tern_router:requests_in_flight", "decode", d2)) == 0;
  })) << get(router.port(), "/metrics").body;
}

TEST(RouterDisagg, BackendErrorsPassThrough) {
  FakeBackend p(prefill());
  FakeBackend d(failing(400, "'temperature' must be >= 0"));
  TestRouter router(disaggregated(p, d));
  const HttpResult r =
      post(router.port(), "/v1/completions", {{"prompt", "x"}, {"temperature", -1}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, server::error_body(400, "'temperature' must be >= 0").dump());
  // Streamed requests too: the status and body, not an event stream.
  const StreamResult s =
      stream(router.port(), "/v1/completions", {{"prompt", "x"}, {"stream", true}});
  EXPECT_EQ(s.status, 400);
  EXPECT_NE(s.error_body.find("must be >= 0"), std::string::npos) << s.error_body;

  FakeBackend bad_prefill(failing(500, "engine failure"));
  FakeBackend d2(replica("decode"));
  TestRouter router2(disaggregated(bad_prefill, d2));
  const HttpResult r2 = post(router2.port(), "/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(r2.status, 500);
  EXPECT_EQ(r2.body, server::error_body(500, "engine failure").dump());
  EXPECT_EQ(d2.num_requests(), 0u);
}

TEST(RouterDisagg, DecodeThatBreaksOffMidStreamEndsWithAnErrorEvent) {
  FakeBackend p(prefill());
  FakeBackend d([](const httplib::Request&, httplib::Response& res) {
    auto sent = std::make_shared<int>(0);
    res.set_chunked_content_provider("text/event-stream", [sent](size_t, httplib::DataSink& sink) {
      if (*sent == 2) return false;  // the instance dies: no last chunk, no [DONE]
      const std::string e = sse_event({{"choices", {{{"index", 0}, {"text", "t"}}}}});
      ++*sent;
      return sink.write(e.data(), e.size());
    });
  });
  TestRouter router(disaggregated(p, d));
  const StreamResult s =
      stream(router.port(), "/v1/completions", {{"prompt", "x"}, {"stream", true}});
  EXPECT_EQ(s.status, 200);  // sent before the break
  EXPECT_FALSE(s.done);
  ASSERT_EQ(s.events.size(), 3u) << s.error_body;
  EXPECT_EQ(s.events[1]["choices"][0]["text"], "t");
  EXPECT_EQ(s.events[2]["error"]["code"], 502);
  EXPECT_NE(s.events[2]["error"]["message"].get<std::string>().find(d.url()), std::string::npos);
  EXPECT_EQ(router_metric(router.port(), "tern_router:errors_total{kind=\"backend_broke_off\"}"),
            1);
}

TEST(RouterDisagg, PrefillWithoutKvTransferParamsIs502) {
  FakeBackend p(replica("not-a-prefill"));  // a plain instance: no kv_transfer_params
  FakeBackend d(replica("decode"));
  TestRouter router(disaggregated(p, d));
  const HttpResult r = post(router.port(), "/v1/completions", {{"prompt", "x"}, {"stream", true}});
  EXPECT_EQ(r.status, 502);
  const json e = r.body_json()["error"];
  EXPECT_EQ(e["code"], 502);
  EXPECT_NE(e["message"].get<std::string>().find(p.url()), std::string::npos) << e;
  EXPECT_NE(e["message"].get<std::string>().find("--role prefill"), std::string::npos) << e;
  EXPECT_EQ(d.num_requests(), 0u);
}

TEST(RouterDisagg, UnreachableBackendIs502ThenTheEmptyPoolIs503) {
  FakeBackend p(prefill());
  FakeBackend d(replica("decode"));
  TestRouter router(disaggregated(p, d));
  d.stop();  // its port no longer answers
  const HttpResult r = post(router.port(), "/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_NE(r.body_json()["error"]["message"].get<std::string>().find(d.url()), std::string::npos)
      << r.body;
  // The decode instance has left its pool: nothing healthy remains.
  const HttpResult r2 = post(router.port(), "/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(r2.status, 503) << r2.body;
  EXPECT_EQ(r2.body_json()["error"]["type"], "ServiceUnavailableError");
  EXPECT_EQ(get(router.port(), "/health").status, 503);
  EXPECT_EQ(router_metric(router.port(), "tern_router:errors_total{kind=\"no_healthy_backend\"}"),
            1);
  EXPECT_EQ(router_metric(router.port(), "tern_router:errors_total{kind=\"backend_unreachable\"}"),
            1);
}

TEST(RouterReplicas, RoundRobinOrder) {
  FakeBackend a(replica("a")), b(replica("b")), c(replica("c"));
  TestRouter router(replicas({&a, &b, &c}));
  EXPECT_EQ(answered_by(router.port(), 6),
            (std::vector<std::string>{"a", "b", "c", "a", "b", "c"}));
  // The replicas get the client's body byte for byte.
  const std::string body = R"({"prompt":"x",  "max_tokens":2.50})";
  http_request(router.port(), "POST", "/v1/completions", body);
  EXPECT_EQ(a.raw_bodies().back(), body);
}

TEST(RouterReplicas, LeastOutstandingAvoidsTheBusyBackend) {
  std::mutex mutex;
  std::condition_variable cv;
  bool release = false;
  FakeBackend slow([&](const httplib::Request& req, httplib::Response& res) {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return release; });
    replica("slow")(req, res);
  });
  FakeBackend fast(replica("fast"));
  TestRouter router(replicas({&slow, &fast}, "least_outstanding"));
  std::thread first(
      [&] { EXPECT_EQ(answered_by(router.port(), 1), std::vector<std::string>{"slow"}); });
  ASSERT_TRUE(eventually([&] { return slow.num_requests() == 1; }));
  // Round robin would send every other one to the busy backend.
  EXPECT_EQ(answered_by(router.port(), 4), std::vector<std::string>(4, "fast"));
  EXPECT_EQ(router_metric(router.port(),
                          backend_series("tern_router:requests_in_flight", "replica", slow)),
            1);
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  cv.notify_all();
  first.join();
  EXPECT_EQ(router_metric(router.port(),
                          backend_series("tern_router:requests_in_flight", "replica", slow)),
            0);
}

TEST(RouterReplicas, SilentBackendIs502AndStaysInItsPool) {
  std::mutex mutex;
  std::condition_variable cv;
  bool release = false;
  FakeBackend silent([&](const httplib::Request& req, httplib::Response& res) {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return release; });
    replica("silent")(req, res);
  });
  router::RouterOptions o = replicas({&silent});
  o.request_timeout = 0.2;
  TestRouter router(o);
  const HttpResult r = post(router.port(), "/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_NE(r.body.find(silent.url()), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("--request-timeout"), std::string::npos) << r.body;
  // Slow is not dead: it stays in its pool (its health checks decide).
  EXPECT_EQ(router_metric(router.port(),
                          backend_series("tern_router:backend_healthy", "replica", silent)),
            1);
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  cv.notify_all();
}

TEST(RouterReplicas, PrefixAwareKeepsAPrefixTogetherAndSpreadsOthers) {
  FakeBackend a(replica("a")), b(replica("b"));
  TestRouter router(replicas({&a, &b}, "prefix_aware"));
  std::string document;
  for (int i = 0; document.size() < 3000; ++i)
    document += "Sentence " + std::to_string(i) + " of the document. ";
  std::vector<std::string> with_doc;
  for (int q = 0; q < 5; ++q)
    with_doc.push_back(
        answered_by(router.port(), 1, document + "Question " + std::to_string(q))[0]);
  EXPECT_EQ(with_doc, std::vector<std::string>(5, with_doc[0]));
  std::vector<std::string> distinct;
  for (int q = 0; q < 4; ++q)
    distinct.push_back(
        answered_by(router.port(), 1, std::string(500, static_cast<char>('k' + q)))[0]);
  EXPECT_EQ(std::count(distinct.begin(), distinct.end(), "a"), 2)
      << ::testing::PrintToString(distinct);
  EXPECT_EQ(std::count(distinct.begin(), distinct.end(), "b"), 2);
  // Chat: a conversation's next turn follows its earlier turns.
  json messages = {{{"role", "system"}, {"content", document}},
                   {{"role", "user"}, {"content", "one"}}};
  const HttpResult c1 = post(router.port(), "/v1/chat/completions", {{"messages", messages}});
  messages.push_back({{"role", "assistant"}, {"content", "reply"}});
  messages.push_back({{"role", "user"}, {"content", "two"}});
  const HttpResult c2 = post(router.port(), "/v1/chat/completions", {{"messages", messages}});
  ASSERT_EQ(c1.status, 200);
  ASSERT_EQ(c2.status, 200);
  EXPECT_EQ(c1.body_json()["backend"], c2.body_json()["backend"]);
}

TEST(RouterHealth, KilledBackendLeavesAndReturns) {
  FakeBackend a(replica("a")), b(replica("b")), c(replica("c"));
  router::RouterOptions o = replicas({&a, &b, &c});
  o.health_check_interval = 0.05;
  TestRouter router(o);
  const std::string healthy_b = backend_series("tern_router:backend_healthy", "replica", b);
  ASSERT_TRUE(eventually([&] { return router_metric(router.port(), healthy_b) == 1; }));
  b.stop();
  const size_t before = b.num_requests();
  // Whether the checks or a request notice first, every request is served by the others.
  const std::vector<std::string> names = answered_by(router.port(), 6);
  EXPECT_EQ(std::count(names.begin(), names.end(), "a"), 3) << ::testing::PrintToString(names);
  EXPECT_EQ(std::count(names.begin(), names.end(), "c"), 3);
  EXPECT_EQ(b.num_requests(), before);
  EXPECT_TRUE(eventually([&] { return router_metric(router.port(), healthy_b) == 0; }));
  EXPECT_EQ(get(router.port(), "/health").status, 200);  // the pool still has healthy ones

  b.start();
  ASSERT_TRUE(eventually([&] { return router_metric(router.port(), healthy_b) == 1; }));
  const std::vector<std::string> after = answered_by(router.port(), 3);
  EXPECT_EQ(std::count(after.begin(), after.end(), "b"), 1) << ::testing::PrintToString(after);
}

TEST(RouterHealth, FailingHealthCheckTakesABackendOut) {
  FakeBackend a(replica("a")), b(replica("b"));
  router::RouterOptions o = replicas({&a, &b});
  o.health_check_interval = 0.05;
  TestRouter router(o);
  const std::string healthy_a = backend_series("tern_router:backend_healthy", "replica", a);
  a.health_status = 503;
  ASSERT_TRUE(eventually([&] { return router_metric(router.port(), healthy_a) == 0; }));
  EXPECT_EQ(answered_by(router.port(), 4), std::vector<std::string>(4, "b"));
  a.health_status = 200;
  ASSERT_TRUE(eventually([&] { return router_metric(router.port(), healthy_a) == 1; }));
  const std::vector<std::string> names = answered_by(router.port(), 2);
  EXPECT_EQ(std::count(names.begin(), names.end(), "a"), 1);
  // /v1/models comes from a healthy backend.
  const HttpResult models = get(router.port(), "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.body_json()["object"], "list");
}

TEST(RouterMetrics, CountsRequestsErrorsAndSeconds) {
  FakeBackend p(prefill());
  FakeBackend d(replica("decode"));
  TestRouter router(disaggregated(p, d));
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(post(router.port(), "/v1/completions", {{"prompt", "x"}}).status, 200);
  EXPECT_EQ(http_request(router.port(), "POST", "/v1/completions", "{not json").status, 400);
  const std::string m = get(router.port(), "/metrics").body;
  auto series = [](const char* name, const char* role, const FakeBackend& b, int status) {
    return std::string(name) + "{role=\"" + role + "\",backend=\"" + b.url() + "\",status=\"" +
           std::to_string(status) + "\"}";
  };
  EXPECT_EQ(metric(m, series("tern_router:requests_total", "prefill", p, 200)), 3) << m;
  EXPECT_EQ(metric(m, series("tern_router:requests_total", "decode", d, 200)), 3);
  EXPECT_EQ(metric(m, backend_series("tern_router:requests_in_flight", "decode", d)), 0);
  EXPECT_EQ(metric(m, backend_series("tern_router:backend_healthy", "prefill", p)), 1);
  EXPECT_EQ(metric(m, "tern_router:prefill_seconds_count"), 3);
  EXPECT_EQ(metric(m, "tern_router:request_seconds_count"), 4);
  EXPECT_EQ(metric(m, "tern_router:request_seconds_bucket{le=\"+Inf\"}"), 4);
  EXPECT_EQ(metric(m, "tern_router:errors_total{kind=\"bad_request\"}"), 1);
  EXPECT_EQ(metric(m, "tern_router:errors_total{kind=\"client_disconnected\"}"), 0);
  EXPECT_NE(m.find("# TYPE tern_router:request_seconds histogram"), std::string::npos);
}

TEST(RouterDisagg, ClientDisconnectClosesTheBackendStream) {
  struct Seen {
    std::atomic<int> written = 0;
    std::atomic<bool> write_failed = false, over = false;
  };
  auto seen = std::make_shared<Seen>();
  constexpr int kChunks = 400;
  FakeBackend p(prefill());
  FakeBackend d([seen](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider(
        "text/event-stream",
        [seen](size_t, httplib::DataSink& sink) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a slow decode
          const std::string chunk = sse_event({{"choices", {{{"index", 0}, {"text", "t"}}}}});
          if (!sink.write(chunk.data(), chunk.size())) {
            seen->write_failed = true;
            return false;
          }
          if (++seen->written == kChunks) sink.done();
          return true;
        },
        [seen](bool) { seen->over = true; });
  });
  TestRouter router(disaggregated(p, d));
  const StreamResult s =
      stream(router.port(), "/v1/completions", {{"prompt", "x"}, {"stream", true}},
             /*stop_after=*/2);
  EXPECT_EQ(s.events.size(), 2u);
  ASSERT_TRUE(eventually([&] { return seen->over.load(); }));
  EXPECT_TRUE(seen->write_failed) << "the backend wrote all " << seen->written << " chunks";
  EXPECT_LT(seen->written, kChunks);
  EXPECT_TRUE(eventually([&] {
    return router_metric(router.port(),
                         backend_series("tern_router:requests_in_flight", "decode", d)) == 0;
  }));
  EXPECT_EQ(router_metric(router.port(), "tern_router:errors_total{kind=\"client_disconnected\"}"),
            1);
}

}  // namespace
}  // namespace tern::testing
