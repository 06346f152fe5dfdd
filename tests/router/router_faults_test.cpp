// tern router when a real backend dies: two `tern serve` processes behind it, one killed with
// SIGKILL while streams run on both. Its streams end at once with an error event naming it (no
// hang), the other's complete, new requests go to the live one, and the killed one rejoins when
// a new process answers /health on its port.
#include <gtest/gtest.h>
#include <signal.h>

#include <future>
#include <string>
#include <vector>

#include "router/router_test_util.h"
#include "server/server_test_util.h"

namespace tern::testing {
namespace {

std::vector<std::string> backend_args() {
  // One sequence at a time: a backend's streams queue, so the killed one has streams running
  // and waiting when it dies.
  return {fixture("stories260K/stories260K.gguf"),
          "--max-model-len",
          "256",
          "--kv-cache-memory",
          "16MiB",
          "--threads",
          "1",
          "--max-num-seqs",
          "1",
          "--served-model-name",
          "test-model",
          "--disable-log-stats"};
}

std::string url_of(int port) { return "http://127.0.0.1:" + std::to_string(port); }

TEST(RouterFaults, ABackendKilledMidLoadFailsItsStreamsAndTheOtherServesOn) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  auto a = std::make_unique<ServeProcess>(backend_args());
  ServeProcess b(backend_args());
  const int a_port = a->port();
  ASSERT_GT(a_port, 0);
  ASSERT_GT(b.port(), 0);
  router::RouterOptions o;
  o.backend_urls = {url_of(a_port), url_of(b.port())};
  o.policy = "round_robin";
  o.health_check_interval = 0.1;
  TestRouter router(o);

  const json body = {
      {"prompt", "Once upon a time"}, {"max_tokens", 200}, {"ignore_eos", true}, {"stream", true}};
  std::vector<std::future<StreamResult>> streams;
  for (int i = 0; i < 8; ++i)
    streams.push_back(std::async(std::launch::async,
                                 [&] { return stream(router.port(), "/v1/completions", body); }));
  // Killed while it generates, once it holds its four streams (one running, three queued):
  // each has its answer's head by then, so each ends with an error event. A request the router
  // had not yet handed over would get a 502 status instead, which is a clear error too, but not
  // the one this test counts.
  ASSERT_TRUE(eventually([&] {
    const std::string m = get(a_port, "/metrics").body;
    return metric(m, gauge("tern:generation_tokens_total")) > 0 &&
           metric(m, gauge("vllm:num_requests_running")) +
                   metric(m, gauge("vllm:num_requests_waiting")) ==
               4;
  }));
  a->kill_and_wait(SIGKILL);

  int completed = 0, broken = 0;
  for (auto& f : streams) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(300)), std::future_status::ready) << "a hang";
    const StreamResult r = f.get();
    EXPECT_EQ(r.status, 200);
    if (r.done) {
      ++completed;
      EXPECT_EQ(r.events.size(), 200u);
      continue;
    }
    ++broken;
    ASSERT_FALSE(r.events.empty());
    const json& last = r.events.back();
    ASSERT_TRUE(last.contains("error")) << last.dump();
    EXPECT_EQ(last["error"]["code"], 502);
    const std::string message = last["error"]["message"];
    EXPECT_NE(message.find(url_of(a_port)), std::string::npos) << message;
  }
  EXPECT_EQ(completed, 4);  // round robin: half went to each
  EXPECT_EQ(broken, 4);

  // New requests go to the live backend, whether a request or a health check finds out first.
  const json short_body = {{"prompt", "Once"}, {"max_tokens", 4}};
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(post(router.port(), "/v1/completions", short_body).status, 200);
  const std::string healthy_a =
      "tern_router:backend_healthy{role=\"replica\",backend=\"" + url_of(a_port) + "\"}";
  EXPECT_TRUE(eventually([&] { return router_metric(router.port(), healthy_a) == 0; }));

  // A new process on the killed one's port: it rejoins once it answers /health, and serves.
  a = std::make_unique<ServeProcess>(backend_args(), a_port);
  ASSERT_EQ(a->port(), a_port);
  ASSERT_TRUE(eventually([&] { return router_metric(router.port(), healthy_a) == 1; }));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(post(router.port(), "/v1/completions", short_body).status, 200);
  EXPECT_GT(metric(get(a_port, "/metrics").body, gauge("tern:generation_tokens_total")), 0);
}

}  // namespace
}  // namespace tern::testing
