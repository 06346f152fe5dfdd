// tern router under many streams at once: a relay holds no thread. 256 streams run through a
// router with one worker thread at the same time (a backend holds every one open until the
// test lets them end), /health answers meanwhile, the process's threads do not grow with the
// streams, and every stream ends with its last event.
#include <dirent.h>
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "http/raw_client.h"
#include "router/router_test_util.h"
#include "tern/http/event_server.h"

namespace tern::testing {
namespace {

using namespace std::chrono_literals;

int threads_of_this_process() {
  int n = 0;
  DIR* dir = ::opendir("/proc/self/task");
  if (!dir) return -1;
  while (const dirent* e = ::readdir(dir))
    if (e->d_name[0] != '.') ++n;
  ::closedir(dir);
  return n;
}

// A backend that starts an SSE stream for every generation request and holds it open until
// release(): on tern's own event server, so that it holds them without a thread each either.
class HeldStreamsBackend {
 public:
  HeldStreamsBackend() {
    http_.route("POST", "/v1/completions", http::Work::Inline,
                [this](const http::Request&, const std::shared_ptr<http::Exchange>& ex) {
                  http::Response head;
                  head.content_type = "text/event-stream";
                  ex->start_stream(std::move(head));
                  ex->write(sse_event({{"choices", {{{"index", 0}, {"text", "a"}}}}}));
                  std::lock_guard lock(mutex_);
                  held_.push_back(ex);
                });
    http_.route(
        "GET", "/health", http::Work::Inline,
        http::answer_with([](const http::Request&, http::Response& res) { res.status = 200; }));
    port_ = http_.bind("127.0.0.1", 0);
    thread_ = std::thread([this] { http_.serve(); });
  }
  ~HeldStreamsBackend() {
    http_.stop();
    thread_.join();
  }

  size_t held() {
    std::lock_guard lock(mutex_);
    return held_.size();
  }
  void release() {
    std::lock_guard lock(mutex_);
    for (const auto& ex : held_) {
      ex->write("data: [DONE]\n\n");
      ex->end_stream();
    }
    held_.clear();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  http::EventServer http_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<http::Exchange>> held_;
};

TEST(RouterLoad, StreamsBeyondTheWorkerThreadsRunAtOnceAndHoldNoThread) {
  constexpr int kStreams = 256;
  HeldStreamsBackend backend;
  router::RouterOptions options;
  options.backend_urls = {backend.url()};
  options.http_threads = 1;
  TestRouter router(options);
  const int threads_before = threads_of_this_process();

  const std::string body = R"({"prompt":"x","max_tokens":4,"stream":true})";
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.push_back(std::make_unique<RawClient>(router.port()));
    ASSERT_TRUE(clients.back()->connected());
    ASSERT_TRUE(clients.back()->send(request));
  }
  // Every stream is under way at the backend at once: none waits for a thread to relay it.
  ASSERT_TRUE(eventually([&] { return backend.held() == static_cast<size_t>(kStreams); }))
      << backend.held() << " of " << kStreams << " streams reached the backend";
  EXPECT_LE(threads_of_this_process(), threads_before + 8)
      << "threads grew with the streams: " << threads_before << " before, "
      << threads_of_this_process() << " with " << kStreams << " streams";
  EXPECT_EQ(get(router.port(), "/health").status, 200);

  backend.release();
  for (auto& c : clients) {
    const std::string got = c->read(30s, "data: [DONE]");
    EXPECT_EQ(status_of(got), 200) << got.substr(0, 200);
    EXPECT_NE(got.find("\"text\":\"a\""), std::string::npos) << got.substr(0, 300);
    EXPECT_NE(got.find("data: [DONE]"), std::string::npos) << got.substr(0, 300);
  }
  EXPECT_TRUE(eventually([&] {
    return router_metric(router.port(),
                         "tern_router:requests_in_flight{role=\"replica\",backend=\"" +
                             backend.url() + "\"}") == 0;
  }));
}

}  // namespace
}  // namespace tern::testing
