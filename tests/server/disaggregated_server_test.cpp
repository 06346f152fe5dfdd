// Prefill/decode disaggregation over HTTP, as a router drives it: `tern serve --role prefill`
// answers a do_remote_decode request with its first token and kv_transfer_params, `--role
// decode` takes them, pulls the KV over UCX and gives what one instance gives alone (greedy
// and seeded, streamed and not, 16 at once, prompts across block boundaries, prefix hits on
// the decode side). Failures answer clearly and leave no block held on either side.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include "server/server_test_util.h"

namespace tern::testing {
namespace {

EngineConfig server_with_role(disagg::KvRole role, double lease_seconds = 30.0) {
  EngineConfig c = server_engine(512);
  c.kv_transfer.role = role;
  c.kv_transfer.port = 0;
  c.kv_transfer.lease_seconds = lease_seconds;
  return c;
}

std::vector<int32_t> prompt_of(int length, int32_t salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < length; ++i) p.push_back(3 + (i * 37 + salt * 11) % 500);
  return p;
}

json completion(const std::vector<int32_t>& prompt, int max_tokens, std::optional<int> seed) {
  json body{{"prompt", prompt}, {"max_tokens", max_tokens}, {"logprobs", 2}, {"ignore_eos", true}};
  if (seed) {
    body["temperature"] = 0.9;
    body["seed"] = *seed;
  } else {
    body["temperature"] = 0;
  }
  return body;
}

// The router's first step: the prefill instance's kv_transfer_params.
json prefill(int port, json body) {
  body["max_tokens"] = 1;
  body["kv_transfer_params"] = json{{"do_remote_decode", true}};
  const HttpResult r = post(port, "/v1/completions", body);
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return json::object();
  const json answer = r.body_json();
  EXPECT_TRUE(answer.contains("kv_transfer_params")) << r.body;
  return answer.value("kv_transfer_params", json::object());
}

// The text and the sampled tokens' logprobs of a completion, streamed or not.
std::pair<std::string, std::vector<double>> text_and_logprobs(int port, const json& body,
                                                              bool streamed) {
  std::pair<std::string, std::vector<double>> out;
  if (!streamed) {
    const HttpResult r = post(port, "/v1/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return out;
    const json choice = r.body_json()["choices"][0];
    out.first = choice["text"];
    for (const json& lp : choice["logprobs"]["token_logprobs"]) out.second.push_back(lp);
    return out;
  }
  json s = body;
  s["stream"] = true;
  const StreamResult r = stream(port, "/v1/completions", s);
  EXPECT_EQ(r.status, 200) << r.error_body;
  EXPECT_TRUE(r.done);
  for (const json& e : r.events)
    for (const json& c : e["choices"]) {
      out.first += c.value("text", "");
      if (c.contains("logprobs") && !c["logprobs"].is_null())
        for (const json& lp : c["logprobs"]["token_logprobs"]) out.second.push_back(lp);
    }
  return out;
}

TEST(DisaggregatedServer, PrefillAndDecodeInstancesGiveWhatOneInstanceGives) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer p(stories260k(), server_with_role(disagg::KvRole::kProducer));
  TestServer d(stories260k(), server_with_role(disagg::KvRole::kConsumer));
  TestServer one(stories260k(), server_engine(512));

  // 16 at once: lengths across block boundaries, every fourth sharing a 64-token prefix
  // (after the first of them, the decode side's prefix cache holds it), greedy and seeded.
  constexpr int kRequests = 16;
  std::vector<std::thread> clients;
  std::atomic<int> same{0};
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      std::vector<int32_t> prompt = prompt_of(1 + (i * 29) % 130, i);
      if (i % 4 == 0) {
        std::vector<int32_t> shared = prompt_of(64, 99);
        shared.insert(shared.end(), prompt.begin(), prompt.end());
        prompt = shared;
      }
      const json body = completion(prompt, 12, i % 2 ? std::optional<int>(i) : std::nullopt);
      json decode = body;
      decode["kv_transfer_params"] = prefill(p.port(), body);
      const bool streamed = i % 3 == 0;
      const auto got = text_and_logprobs(d.port(), decode, streamed);
      const auto want = text_and_logprobs(one.port(), body, false);
      EXPECT_EQ(got.first, want.first) << "request " << i;
      EXPECT_EQ(got.second, want.second) << "request " << i;  // bit for bit
      if (got == want) ++same;
    });
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(same.load(), kRequests);

  // Now the decode side's prefix cache holds the shared 64 tokens: only the rest moves.
  const double hits_before =
      metric(get(d.port(), "/metrics").body, gauge("tern:prefix_cache_hits_total"));
  std::vector<int32_t> prompt = prompt_of(64, 99);
  for (int i = 0; i < 21; ++i) prompt.push_back(450 + i);
  const json body = completion(prompt, 8, 5);
  json decode = body;
  decode["kv_transfer_params"] = prefill(p.port(), body);
  EXPECT_EQ(text_and_logprobs(d.port(), decode, true), text_and_logprobs(one.port(), body, false));
  EXPECT_EQ(metric(get(d.port(), "/metrics").body, gauge("tern:prefix_cache_hits_total")),
            hits_before + 64);

  wait_until_idle(p.port());  // every lease pulled and its blocks freed
  wait_until_idle(d.port());
  const std::string pm = get(p.port(), "/metrics").body;
  const std::string dm = get(d.port(), "/metrics").body;
  EXPECT_EQ(metric(pm, gauge("tern:kv_transfer_leases_held")), 0);
  EXPECT_GT(metric(pm, gauge("tern:kv_transfer_sent_bytes_total")), 0);
  EXPECT_EQ(metric(pm, gauge("tern:kv_transfer_sent_bytes_total")),
            metric(dm, gauge("tern:kv_transfer_received_bytes_total")));
  EXPECT_EQ(metric(pm, gauge("tern:kv_transfer_sent_blocks_total")),
            metric(dm, gauge("tern:kv_transfer_received_blocks_total")));
  EXPECT_GT(metric(dm, gauge("tern:kv_transfer_seconds_count")), 0);
}

TEST(DisaggregatedServer, ExpiredLeaseFreesItsBlocksAndThePullFailsClearly) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer p(stories260k(), server_with_role(disagg::KvRole::kProducer, /*lease_seconds=*/0.3));
  TestServer d(stories260k(), server_with_role(disagg::KvRole::kConsumer));
  const json body = completion(prompt_of(60, 1), 4, std::nullopt);
  json decode = body;
  decode["kv_transfer_params"] = prefill(p.port(), body);
  EXPECT_GT(metric(get(p.port(), "/metrics").body, gauge("tern:kv_cache_usage_perc")), 0);
  // The idle engine wakes at the lease's expiry and frees its blocks: no request needed.
  wait_until_idle(p.port());
  EXPECT_EQ(metric(get(p.port(), "/metrics").body, gauge("tern:kv_transfer_leases_expired_total")),
            1);
  const HttpResult r = post(d.port(), "/v1/completions", decode);
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_NE(r.body.find("expired"), std::string::npos) << r.body;
  wait_until_idle(d.port());
}

TEST(DisaggregatedServer, DeadPrefillInstanceFailsTheRequestOrItIsPrefilledHere) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const json body = completion(prompt_of(70, 2), 6, std::nullopt);
  json decode = body;
  {
    TestServer p(stories260k(), server_with_role(disagg::KvRole::kProducer));
    decode["kv_transfer_params"] = prefill(p.port(), body);
  }
  TestServer d(stories260k(), server_with_role(disagg::KvRole::kConsumer));
  const HttpResult failed = post(d.port(), "/v1/completions", decode);
  EXPECT_EQ(failed.status, 500) << failed.body;
  const std::string where = decode["kv_transfer_params"]["remote_host"].get<std::string>() + ":" +
                            std::to_string(decode["kv_transfer_params"]["remote_port"].get<int>());
  EXPECT_NE(failed.body.find(where), std::string::npos) << failed.body;
  wait_until_idle(d.port());
  EXPECT_EQ(metric(get(d.port(), "/metrics").body, gauge("tern:kv_transfer_pulls_failed_total")),
            1);

  EngineConfig recompute = server_with_role(disagg::KvRole::kConsumer);
  recompute.kv_transfer.load_failure_policy = disagg::KvLoadFailurePolicy::kRecompute;
  TestServer r(stories260k(), recompute);
  TestServer one(stories260k(), server_engine(512));
  EXPECT_EQ(text_and_logprobs(r.port(), decode, true), text_and_logprobs(one.port(), body, false));
  wait_until_idle(r.port());
}

TEST(DisaggregatedServer, GarbageOnTheTransferPortIsRefusedAndServingGoesOn) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer p(stories260k(), server_with_role(disagg::KvRole::kProducer));
  TestServer d(stories260k(), server_with_role(disagg::KvRole::kConsumer));
  const json body = completion(prompt_of(40, 3), 4, std::nullopt);
  json decode = body;
  decode["kv_transfer_params"] = prefill(p.port(), body);
  const int kv_port = decode["kv_transfer_params"]["remote_port"];
  // Not UCX at all: a TCP client writes junk at the transfer port and hangs up.
  for (int i = 0; i < 3; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(kv_port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      const std::string junk(4096, static_cast<char>(0xA5 + i));
      EXPECT_GT(write(fd, junk.data(), junk.size()), 0);
    }
    close(fd);
  }
  TestServer one(stories260k(), server_engine(512));
  EXPECT_EQ(text_and_logprobs(d.port(), decode, false), text_and_logprobs(one.port(), body, false));
  wait_until_idle(p.port());
  wait_until_idle(d.port());
}

// A decode instance (the real binary) that dies with pulls pending or in flight: whatever it
// had done, the prefill instance's leases end (pulled, failed or expired) and every block comes
// back.
TEST(DisaggregatedServer, DecodeInstanceThatDiesLeavesNoBlockHeldOnThePrefillSide) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer p(stories260k(), server_with_role(disagg::KvRole::kProducer, /*lease_seconds=*/1.0));
  ServeProcess decode({fixture("stories260K/stories260K.gguf"), "--max-model-len", "512",
                       "--kv-cache-memory", "32MiB", "--threads", "1", "--role", "decode",
                       "--served-model-name", "test-model"});
  const int port = decode.port();
  ASSERT_GT(port, 0) << "the decode instance did not start";

  std::vector<std::future<HttpResult>> decodes;
  for (int i = 0; i < 8; ++i) {
    json body = completion(prompt_of(300, 10 + i), 64, std::nullopt);
    body["kv_transfer_params"] = prefill(p.port(), body);
    decodes.push_back(std::async(std::launch::async,
                                 [port, body] { return post(port, "/v1/completions", body); }));
  }
  decode.kill_and_wait(SIGKILL);
  for (auto& d : decodes) d.get();  // answered or cut off; either way over
  wait_until_idle(p.port());
  const std::string m = get(p.port(), "/metrics").body;
  EXPECT_EQ(metric(m, gauge("tern:kv_transfer_leases_held")), 0);
  EXPECT_EQ(metric(m, gauge("tern:kv_transfer_leases_granted_total")), 8);
}

TEST(DisaggregatedServer, RequestsARoleCannotServeAre400s) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer d(stories260k(), server_with_role(disagg::KvRole::kConsumer));
  json body = completion(prompt_of(20, 4), 4, std::nullopt);
  body["kv_transfer_params"] = json{{"do_remote_decode", true}};
  HttpResult r = post(d.port(), "/v1/completions", body);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("--role prefill"), std::string::npos) << r.body;
  body["stream"] = true;
  r = post(d.port(), "/v1/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("stream"), std::string::npos) << r.body;
  body.erase("stream");
  body["kv_transfer_params"] = json{{"do_remote_decode", true}, {"remote_tp_size", 2}};
  r = post(d.port(), "/v1/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("remote_tp_size"), std::string::npos) << r.body;
  wait_until_idle(d.port());
}

}  // namespace
}  // namespace tern::testing
