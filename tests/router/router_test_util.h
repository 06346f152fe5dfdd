// Shared by the router tests: fake backends (small httplib servers on loopback that record what
// they are sent and answer as a replica, a prefill or a decode instance would), tern router in
// process on a free port, and waiting for a condition without a timed assertion.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server/server_test_util.h"
#include "tern/router/router_server.h"
#include "tern/server/api_error.h"

namespace tern::testing {

class FakeBackend {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  explicit FakeBackend(Handler generation) : generation_(std::move(generation)) { start(); }
  ~FakeBackend() { stop(); }
  FakeBackend(const FakeBackend&) = delete;
  FakeBackend& operator=(const FakeBackend&) = delete;

  // Listens again on the same port after stop() (the first start takes any free one).
  void start() {
    server_ = std::make_unique<httplib::Server>();
    server_->Post("/v1/completions", [this](const auto& req, auto& res) { handle(req, res); });
    server_->Post("/v1/chat/completions", [this](const auto& req, auto& res) { handle(req, res); });
    server_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      res.status = health_status.load();
    });
    server_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(
          json{{"object", "list"}, {"data", {{{"id", "fake-" + std::to_string(port_)}}}}}.dump(),
          "application/json");
    });
    if (port_ == 0) {
      port_ = server_->bind_to_any_port("127.0.0.1");
    } else {
      ASSERT_TRUE(server_->bind_to_port("127.0.0.1", port_)) << "port " << port_ << " is taken";
    }
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  // Closes the listening socket and every connection: the backend is gone.
  void stop() {
    if (!server_) return;
    server_->stop();
    thread_.join();
    server_.reset();
  }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The bodies of the POSTs it was sent, in order (as JSON; null when not JSON).
  std::vector<json> bodies() const {
    std::lock_guard lock(mutex_);
    return bodies_;
  }
  std::vector<std::string> raw_bodies() const {
    std::lock_guard lock(mutex_);
    return raw_bodies_;
  }
  std::vector<std::string> authorizations() const {
    std::lock_guard lock(mutex_);
    return authorizations_;
  }
  size_t num_requests() const {
    std::lock_guard lock(mutex_);
    return bodies_.size();
  }

  std::atomic<int> health_status = 200;

 private:
  void handle(const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard lock(mutex_);
      raw_bodies_.push_back(req.body);
      bodies_.push_back(json::parse(req.body, nullptr, false));
      authorizations_.push_back(req.get_header_value("Authorization"));
    }
    generation_(req, res);
  }

  Handler generation_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mutex_;
  std::vector<json> bodies_;
  std::vector<std::string> raw_bodies_;
  std::vector<std::string> authorizations_;
};

// The SSE event of one fake chunk.
inline std::string sse_event(const json& data) { return "data: " + data.dump() + "\n\n"; }

// A replica named `name`: streamed (when asked) three events then [DONE], else one JSON answer;
// both carry the name, so a test sees which backend answered.
inline FakeBackend::Handler replica(const std::string& name) {
  return [name](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body);
    if (body.value("stream", false)) {
      res.set_chunked_content_provider(
          "text/event-stream", [name](size_t, httplib::DataSink& sink) {
            std::string out;
            for (int i = 0; i < 3; ++i)
              out += sse_event({{"id", "cmpl-" + name},
                                {"backend", name},
                                {"choices", {{{"index", 0}, {"text", std::to_string(i)}}}}});
            out += "data: [DONE]\n\n";
            sink.write(out.data(), out.size());
            sink.done();
            return true;
          });
      return;
    }
    res.set_content(json{{"id", "cmpl-" + name},
                         {"backend", name},
                         {"choices", {{{"index", 0}, {"text", name}}}}}
                        .dump(),
                    "application/json");
  };
}

inline json fake_kv_transfer_params() {
  return {{"do_remote_prefill", true},   {"remote_engine_id", "e"},
          {"remote_host", "127.0.0.1"},  {"remote_port", 1},
          {"remote_block_ids", {1, 2}},  {"remote_lease_id", "abc"},
          {"remote_lease_expires_at", 0}};
}

// A prefill instance: one token and the kv_transfer_params that say where its blocks are.
inline FakeBackend::Handler prefill() {
  return [](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"id", "cmpl-prefill"},
                         {"choices", {{{"index", 0}, {"text", "A"}, {"finish_reason", "length"}}}},
                         {"kv_transfer_params", fake_kv_transfer_params()}}
                        .dump(),
                    "application/json");
  };
}

// An answer with this status and an OpenAI error body.
inline FakeBackend::Handler failing(int status, const std::string& message) {
  return [status, message](const httplib::Request&, httplib::Response& res) {
    res.status = status;
    res.set_content(server::error_body(status, message).dump(), "application/json");
  };
}

// Polls `condition` until it holds; false when it never did in a long while (a hang, not a
// latency the test measures).
inline bool eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 3000; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

// tern router in process on a free loopback port.
class TestRouter {
 public:
  explicit TestRouter(router::RouterOptions options) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.log = false;
    server_ = std::make_unique<router::RouterServer>(std::move(options));
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->serve(); });
    // The first round of health checks runs as the router starts: after it, a backend a test
    // stops is found out by a request (or the test's own short interval), never by chance.
    EXPECT_TRUE(eventually([this] {
      return metric(get(port_, "/metrics").body, "tern_router:health_check_rounds_total") >= 1;
    }));
  }
  ~TestRouter() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  std::unique_ptr<router::RouterServer> server_;
  int port_ = 0;
  std::thread thread_;
};

inline router::RouterOptions replicas(const std::vector<const FakeBackend*>& backends,
                                      const std::string& policy = "round_robin") {
  router::RouterOptions o;
  for (const FakeBackend* b : backends) o.backend_urls.push_back(b->url());
  o.policy = policy;
  o.health_check_interval = 3600;  // tests that need checks set their own
  return o;
}

inline router::RouterOptions disaggregated(const FakeBackend& p, const FakeBackend& d) {
  router::RouterOptions o;
  o.prefill_urls = {p.url()};
  o.decode_urls = {d.url()};
  o.health_check_interval = 3600;
  return o;
}

inline double router_metric(int port, const std::string& series) {
  return metric(get(port, "/metrics").body, series);
}

inline std::string backend_series(const char* name, const char* role, const FakeBackend& b) {
  return std::string(name) + "{role=\"" + role + "\",backend=\"" + b.url() + "\"}";
}

}  // namespace tern::testing
