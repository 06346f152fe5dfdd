// tern serve under load, abuse and faults, on loopback only, each case bounded in count and
// time: idle and slowloris connections beside running streams, hundreds of streams past
// --max-num-seqs, a storm of clients that hang up, and --max-waiting-requests. What is asserted
// is what must hold (every probe answered, every stream complete, nothing left behind); the
// latencies are printed, not asserted (they are the note's figures, not a test's).
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "http/raw_client.h"
#include "server/server_test_util.h"

namespace tern::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string post_request(const std::string& path, const json& body) {
  const std::string text = body.dump();
  return "POST " + path +
         " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(text.size()) + "\r\n\r\n" + text;
}

struct Exchange {
  std::string request;
  // Hang up once this appears in the answer ("" : read to the end; "\r\n": as soon as
  // anything came back; a sentinel never sent: right after sending).
  std::string cut_at;
  bool cut_at_once = false;  // hang up right after sending
  std::string answer;
  bool ended = false;  // the server closed the connection after a whole answer
};

// Runs every exchange at once on its own connection, one thread polling them all, for at most
// `limit`.
void run_all(int port, std::vector<Exchange>& exchanges, std::chrono::seconds limit) {
  std::vector<std::unique_ptr<RawClient>> clients;
  for (Exchange& e : exchanges) {
    clients.push_back(std::make_unique<RawClient>(port));
    ASSERT_TRUE(clients.back()->connected());
    clients.back()->send(e.request);
    if (e.cut_at_once) clients.back()->close();
  }
  const Clock::time_point deadline = Clock::now() + limit;
  for (;;) {
    size_t open = 0;
    for (size_t i = 0; i < exchanges.size(); ++i) {
      RawClient& c = *clients[i];
      Exchange& e = exchanges[i];
      if (!c.is_open()) continue;
      ++open;
      const std::string got = c.read(0ms);
      e.answer += got;
      if (c.peer_closed()) {
        e.ended = true;
        c.close();
      } else if (!e.cut_at.empty() && e.answer.find(e.cut_at) != std::string::npos) {
        c.close();
      }
    }
    if (open == 0 || Clock::now() > deadline) break;
    std::this_thread::sleep_for(2ms);
  }
}

int count_entries(const char* dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// Probes `path` every `period` until `stop`; each probe's latency in ms (-1: no answer).
std::vector<double> probe(int port, const std::string& path, std::atomic<bool>& stop,
                          std::chrono::milliseconds period) {
  std::vector<double> latencies;
  while (!stop) {
    const Clock::time_point t0 = Clock::now();
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(5, 0);
    client.set_read_timeout(5, 0);
    const httplib::Result r = client.Get(path);
    latencies.push_back(r && r->status == 200
                            ? std::chrono::duration<double, std::milli>(Clock::now() - t0).count()
                            : -1.0);
    std::this_thread::sleep_for(period);
  }
  return latencies;
}

void report(const char* what, std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) { return ms[static_cast<size_t>(q * (ms.size() - 1))]; };
  std::printf("%s: %zu probes, p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", what, ms.size(), at(0.5),
              at(0.99), ms.back());
}

json stream_body(int max_tokens) {
  return {{"prompt", "Once upon a time"},
          {"max_tokens", max_tokens},
          {"ignore_eos", true},
          {"stream", true}};
}

TEST(ServerLoad, IdleAndSlowlorisConnectionsDoNotStopProbesOrStreams) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  server::ServerOptions options;
  options.keep_alive_timeout = 120s;  // held for the whole case, however slow the machine
  TestServer s(stories260k(), server_engine(), options);
  // 2,000 connections that say nothing, and 64 that trickle a header line at a time.
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 2000; ++i) idle.push_back(std::make_unique<RawClient>(s.port()));
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 64; ++i) {
    slow.push_back(std::make_unique<RawClient>(s.port()));
    slow.back()->send("POST /v1/completions HTTP/1.1\r\n");
  }
  std::atomic<bool> stop = false;
  std::thread trickle([&] {
    for (int line = 0; !stop; ++line) {
      for (auto& c : slow) c->send("X-Trickle-" + std::to_string(line) + ": 1\r\n");
      std::this_thread::sleep_for(200ms);
    }
  });
  auto probes =
      std::async(std::launch::async, [&] { return probe(s.port(), "/health", stop, 20ms); });

  std::vector<std::future<StreamResult>> streams;
  for (int i = 0; i < 32; ++i)
    streams.push_back(std::async(
        std::launch::async, [&] { return stream(s.port(), "/v1/completions", stream_body(48)); }));
  for (auto& f : streams) {
    const StreamResult r = f.get();
    EXPECT_EQ(r.status, 200) << r.error_body;
    EXPECT_TRUE(r.done);
    EXPECT_EQ(r.events.size(), 48u);
  }
  std::this_thread::sleep_for(200ms);  // a few probes after the streams too
  const double held = metric(get(s.port(), "/metrics").body, "tern:http_connections_open");
  stop = true;
  trickle.join();
  const std::vector<double> latencies = probes.get();
  ASSERT_FALSE(latencies.empty());
  for (double ms : latencies) EXPECT_GE(ms, 0) << "a /health probe got no answer";
  report("/health beside 2,000 idle + 64 slowloris connections and 32 streams", latencies);
  EXPECT_GE(held, 2000) << "the server did not hold the idle connections";
}

TEST(ServerLoad, HundredsOfStreamsPastMaxNumSeqsAllComplete) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  EngineConfig config = server_engine();
  config.scheduler.max_num_seqs = 64;
  TestServer s(stories260k(), config);
  std::atomic<bool> stop = false;
  auto probes =
      std::async(std::launch::async, [&] { return probe(s.port(), "/metrics", stop, 20ms); });
  std::vector<Exchange> exchanges(512);
  for (Exchange& e : exchanges) e.request = post_request("/v1/completions", stream_body(16));
  run_all(s.port(), exchanges, 300s);
  stop = true;
  int complete = 0;
  for (const Exchange& e : exchanges)
    complete +=
        e.ended && status_of(e.answer) == 200 && e.answer.find("data: [DONE]") != std::string::npos;
  EXPECT_EQ(complete, 512);
  const std::vector<double> latencies = probes.get();
  for (double ms : latencies) EXPECT_GE(ms, 0) << "a /metrics scrape got no answer";
  report("/metrics during 512 streams (max_num_seqs 64)", latencies);
  wait_until_idle(s.port());
}

TEST(ServerLoad, AStormOfClientsThatHangUpLeavesNothingBehind) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer s(stories260k(), server_engine());
  // Warm: the engine's threads exist, the allocator has its arenas.
  ASSERT_EQ(post(s.port(), "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 8}}).status, 200);
  const int fds_before = count_entries("/proc/self/fd");
  const int threads_before = count_entries("/proc/self/task");
  const int64_t rss_before = resident_bytes();

  int cut = 0;
  for (int wave = 0; wave < 10; ++wave) {
    std::vector<Exchange> exchanges(100);
    for (size_t i = 0; i < exchanges.size(); ++i) {
      Exchange& e = exchanges[i];
      const bool streamed = i % 2 == 0;
      json body = {{"prompt", "Once upon a time"}, {"max_tokens", 32}, {"ignore_eos", true}};
      if (streamed) body["stream"] = true;
      e.request = post_request("/v1/completions", body);
      if (i % 10 < 3) {  // 30% hang up: a stream after its first token, the others at once
        ++cut;
        if (streamed)
          e.cut_at = "data: {";
        else
          e.cut_at_once = true;
      }
    }
    run_all(s.port(), exchanges, 120s);
    for (const Exchange& e : exchanges) {
      if (e.cut_at.empty() && !e.cut_at_once) {
        EXPECT_EQ(status_of(e.answer), 200);
      }
    }
  }
  EXPECT_EQ(cut, 300);
  wait_until_idle(s.port());
  EXPECT_EQ(s.server().num_unfinished_requests(), 0);
  const std::string m = get(s.port(), "/metrics").body;
  EXPECT_EQ(metric(m, gauge("tern:kv_cache_usage_perc")), 0);
  EXPECT_EQ(metric(m, gauge("tern:num_requests_running")), 0);
  // The server closes its side of a hung-up connection as soon as it reads the hang-up.
  int fds_after = 0;
  for (int i = 0; i < 500; ++i) {
    fds_after = count_entries("/proc/self/fd");
    if (fds_after <= fds_before) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_LE(fds_after, fds_before);
  EXPECT_LE(count_entries("/proc/self/task"), threads_before);
  const int64_t growth = resident_bytes() - rss_before;
  std::printf("after 1,000 requests (300 hung up): fds %d -> %d, threads %d, RSS %+.1f MiB\n",
              fds_before, fds_after, threads_before, static_cast<double>(growth) / (1 << 20));
  EXPECT_LT(growth, int64_t{128} << 20);
}

TEST(ServerLoad, MaxWaitingRequestsAnswers503AndLosesNothingBelowIt) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  EngineConfig config = server_engine();
  config.scheduler.max_num_seqs = 1;
  server::ServerOptions options;
  options.max_waiting_requests = 2;
  TestServer s(stories260k(), config, options);
  // One long request runs (the only sequence the engine takes); the others come while it does.
  RawClient running(s.port());
  running.send(post_request("/v1/completions", stream_body(240)));
  ASSERT_NE(running.read(60s, "data: {").find("data: {"), std::string::npos);
  std::vector<Exchange> exchanges(12);
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"ignore_eos", true}};
  for (Exchange& e : exchanges) e.request = post_request("/v1/completions", body);
  run_all(s.port(), exchanges, 120s);
  int served = 0, refused = 0;
  for (const Exchange& e : exchanges) {
    const int status = status_of(e.answer);
    if (status == 200) {
      ++served;
      const json r = json::parse(e.answer.substr(e.answer.find("\r\n\r\n") + 4));
      EXPECT_EQ(r["usage"]["completion_tokens"], 16);
    } else {
      ++refused;
      EXPECT_EQ(status, 503) << e.answer;
      EXPECT_NE(e.answer.find("Retry-After: 1"), std::string::npos) << e.answer;
      const json r = json::parse(e.answer.substr(e.answer.find("\r\n\r\n") + 4));
      EXPECT_NE(r["error"]["message"].get<std::string>().find("--max-waiting-requests 2"),
                std::string::npos);
    }
  }
  EXPECT_EQ(served + refused, 12);
  EXPECT_GE(served, 2);  // two wait behind the running one
  EXPECT_GE(refused, 1);
  EXPECT_NE(running.read(60s, "[DONE]").find("[DONE]"), std::string::npos);
  EXPECT_EQ(metric(get(s.port(), "/metrics").body,
                   "tern:requests_rejected_queue_full_total{model_name=\"test-model\"}"),
            refused);
  wait_until_idle(s.port());
}

}  // namespace
}  // namespace tern::testing
