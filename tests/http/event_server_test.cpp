// EventServer, the HTTP server of tern serve and tern router: a port in use is a start-up error,
// a JSON body is read whatever its Content-Type says, and what production servers hold: idle
// and slow clients cost no thread and are timed out, requests are answered in order on one
// connection, streams are chunked, a hang-up reaches the answer under way, and a connection
// past the limit gets a 503.
#include "tern/http/event_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "http/raw_client.h"
#include "server/server_test_util.h"
#include "tern/core/error.h"

namespace tern::testing {
namespace {

using namespace std::chrono_literals;
using http::EventServer;
using http::Work;

class ServingThread {
 public:
  explicit ServingThread(EventServer& http) : http_(http), thread_([&] { http_.serve(); }) {}
  ~ServingThread() {
    http_.stop();
    thread_.join();
  }

 private:
  EventServer& http_;
  std::thread thread_;
};

http::Handler echo_body() {
  return http::answer_with([](const http::Request& req, http::Response& res) {
    res.set_content(req.body, "text/plain");
  });
}

TEST(EventServer, APortInUseIsAnErrorNamingThePort) {
  EventServer first;
  const int port = first.bind("127.0.0.1", 0);
  EventServer second;
  try {
    second.bind("127.0.0.1", port);
    FAIL() << "a second server listened on port " << port;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("port " + std::to_string(port) + " is in use"),
              std::string::npos)
        << e.what();
  }
}

TEST(EventServer, APortOutsideTheRangeIsRefused) {
  EventServer http;
  EXPECT_THROW(http.bind("127.0.0.1", 99999), Error);
  EXPECT_THROW(http.bind("127.0.0.1", -1), Error);
}

TEST(EventServer, AJsonBodyIsReadWhateverItsContentTypeSays) {
  http::ServerLimits limits;
  limits.reader.max_body_bytes = 1 << 20;
  EventServer http(limits);
  std::string received;
  http.route("POST", "/echo", Work::Worker,
             http::answer_with([&](const http::Request& req, http::Response& res) {
               received = req.body;
               res.set_content("{}", "application/json");
             }));
  const int port = http.bind("127.0.0.1", 0);
  ServingThread serving(http);
  // curl -d sends this type; a server that parses forms would refuse such a body past 8 KiB.
  const std::string body = "{\"prompt\":\"" + std::string(9000, 'a') + "\"}";
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain", "application/json"}) {
    received.clear();
    const HttpResult r = http_request(port, "POST", "/echo", body, {{"Content-Type", type}});
    EXPECT_EQ(r.status, 200) << type;
    EXPECT_EQ(received, body) << type;
  }
}

TEST(EventServer, TheRequestFilterStillAnswersFirst) {
  EventServer http;
  http.route(
      "POST", "/echo", Work::Inline,
      http::answer_with([](const http::Request&, http::Response& res) { res.status = 200; }));
  http.set_request_filter([](const http::Request& req, http::Response& res) {
    if (!req.header("Authorization").empty()) return false;
    res.status = 401;
    return true;
  });
  const int port = http.bind("127.0.0.1", 0);
  ServingThread serving(http);
  EXPECT_EQ(http_request(port, "POST", "/echo", "{}").status, 401);
  EXPECT_EQ(http_request(port, "POST", "/echo", "{}", {{"Authorization", "Bearer x"}}).status, 200);
}

TEST(EventServer, ErrorsGetTheErrorPageAndMalformedRequestsA400) {
  http::ServerLimits limits;
  limits.reader.max_body_bytes = 100;
  limits.reader.max_header_bytes = 1024;
  EventServer http(limits);
  http.route("POST", "/echo", Work::Inline, echo_body());
  http.set_error_page([](const http::Request& req, std::string_view detail, http::Response& res) {
    res.set_content("page " + std::to_string(res.status) + " " + req.method + " " + req.path + " " +
                        std::string(detail),
                    "text/plain");
  });
  const int port = http.bind("127.0.0.1", 0);
  ServingThread serving(http);

  const HttpResult missing = http_request(port, "GET", "/nowhere");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, "page 404 GET /nowhere ");
  EXPECT_EQ(http_request(port, "GET", "/echo").status, 404);  // the page may call it a 405

  const HttpResult big = http_request(port, "POST", "/echo", std::string(101, 'x'));
  EXPECT_EQ(big.status, 413);
  EXPECT_NE(big.body.find("larger than 100 bytes"), std::string::npos) << big.body;

  RawClient garbage(port);
  garbage.send("NOT HTTP AT ALL\r\n\r\n");
  const std::string answer = garbage.read(5s, "\r\n\r\n");
  EXPECT_EQ(status_of(answer), 400) << answer;
  EXPECT_TRUE(garbage.closed_by_server(5s));

  RawClient huge_header(port);
  huge_header.send("GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(2000, 'a') +
                   "\r\n\r\n");
  EXPECT_EQ(status_of(huge_header.read(5s, "\r\n\r\n")), 431);
}

TEST(EventServer, PipelinedRequestsAreAnsweredInOrderOnOneConnection) {
  EventServer http;
  http.route("POST", "/echo", Work::Worker, echo_body());
  const int port = http.bind("127.0.0.1", 0);
  ServingThread serving(http);
  RawClient c(port);
  std::string requests;
  for (int i = 0; i < 5; ++i) {
    const std::string body = "request " + std::to_string(i);
    requests += "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                "\r\n\r\n" + body;
  }
  c.send(requests);
  const std::string answers = c.read(10s, "request 4");
  size_t at = 0;
  for (int i = 0; i < 5; ++i) {
    const size_t found = answers.find("request " + std::to_string(i), at);
    ASSERT_NE(found, std::string::npos) << i << ": " << answers;
    at = found;
  }
  EXPECT_EQ(status_of(answers), 200);
}

TEST(EventServer, ExpectContinueGetsA100BeforeTheBody) {
  EventServer http;
  http.route("POST", "/echo", Work::Inline, echo_body());
  const int port = http.bind("127.0.0.1", 0);
  ServingThread serving(http);
  RawClient c(port);
  c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(status_of(c.read(5s, "\r\n\r\n")), 100);
  c.send("hello");
  const std::string answer = c.read(5s, "hello");
  EXPECT_EQ(status_of(answer), 200) << answer;
}

TEST(EventServer, SlowAndIdleClientsAreTimedOut) {
  http::ServerLimits limits;
  limits.header_timeout = 300ms;
  limits.keep_alive_timeout = 200ms;
  EventServer http(limits);
  http.route("GET", "/health", Work::Inline,
             http::answer_with([](const http::Request&, http::Response&) {}));
  const int port = http.bind("127.0.0.1", 0);
  ServingThread serving(http);

  RawClient idle(port);  // connects and says nothing
  // Slowloris: one header line at a time, each well within any read timeout.
  RawClient slow(port);
  slow.send("GET /health HTTP/1.1\r\n");
  bool slow_closed = false;
  for (int i = 0; i < 20 && !slow_closed; ++i) {
    slow.send("X-Trickle: " + std::to_string(i) + "\r\n");
    slow_closed = slow.closed_by_server(100ms);
  }
  EXPECT_TRUE(slow_closed) << "a header trickled in for 2 s against a 300 ms deadline";
  EXPECT_TRUE(idle.closed_by_server(2s));

  // Between requests the keep-alive timeout applies.
  RawClient kept(port);
  kept.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(status_of(kept.read(2s, "\r\n\r\n")), 200);
  EXPECT_TRUE(kept.closed_by_server(2s));
  EXPECT_GE(http.counts().timed_out, 3);
}

TEST(EventServer, StreamsAreChunkedAndEndWithTheLastChunk) {
  EventServer http;
  http.route("GET", "/stream", Work::Worker,
             [](const http::Request&, const std::shared_ptr<http::Exchange>& ex) {
               http::Response head;
               head.content_type = "text/event-stream";
               ex->start_stream(std::move(head));
               for (int i = 0; i < 3; ++i) ex->write("data: " + std::to_string(i) + "\n\n");
               ex->end_stream();
             });
  const int port = http.bind("127.0.0.1", 0);
  ServingThread serving(http);
  const HttpResult r = http_request(port, "GET", "/stream");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");

  // HTTP/1.0 knows no chunks: the stream ends with the connection.
  RawClient old(port);
  old.send("GET /stream HTTP/1.0\r\n\r\n");
  const std::string answer = old.read(5s);
  EXPECT_NE(answer.find("\r\n\r\ndata: 0\n\ndata: 1\n\ndata: 2\n\n"), std::string::npos) << answer;
  EXPECT_EQ(answer.find("chunked"), std::string::npos) << answer;
}

TEST(EventServer, AClientThatHangsUpReachesTheAnswerUnderWay) {
  EventServer http;
  std::promise<void> closed;
  std::atomic<bool> started = false;
  http.route("GET", "/forever", Work::Worker,
             [&](const http::Request&, const std::shared_ptr<http::Exchange>& ex) {
               ex->on_close([&] { closed.set_value(); });
               started = true;  // and never answers
             });
  const int port = http.bind("127.0.0.1", 0);
  ServingThread serving(http);
  {
    RawClient c(port);
    c.send("GET /forever HTTP/1.1\r\nHost: x\r\n\r\n");
    while (!started) std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(closed.get_future().wait_for(10s), std::future_status::ready);
}

TEST(EventServer, InlineRoutesAnswerWhileEveryWorkerIsBusy) {
  http::ServerLimits limits;
  limits.worker_threads = 2;
  EventServer http(limits);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  http.route("GET", "/slow", Work::Worker,
             http::answer_with([&](const http::Request&, http::Response&) { released.wait(); }));
  http.route("GET", "/health", Work::Inline,
             http::answer_with([](const http::Request&, http::Response&) {}));
  const int port = http.bind("127.0.0.1", 0);
  ServingThread serving(http);
  std::vector<std::future<HttpResult>> slow;
  for (int i = 0; i < 4; ++i)
    slow.push_back(
        std::async(std::launch::async, [&] { return http_request(port, "GET", "/slow"); }));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(http_request(port, "GET", "/health").status, 200);
  release.set_value();
  for (auto& f : slow) EXPECT_EQ(f.get().status, 200);
}

TEST(EventServer, ConnectionsPastTheLimitGetA503) {
  http::ServerLimits limits;
  limits.max_connections = 3;
  EventServer http(limits);
  http.route("GET", "/health", Work::Inline,
             http::answer_with([](const http::Request&, http::Response&) {}));
  http.set_error_page([](const http::Request&, std::string_view detail, http::Response& res) {
    res.set_content(std::string(detail), "text/plain");
  });
  const int port = http.bind("127.0.0.1", 0);
  ServingThread serving(http);
  std::vector<RawClient> held;
  for (int i = 0; i < 3; ++i) {
    held.emplace_back(port);
    held.back().send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(status_of(held.back().read(5s, "\r\n\r\n")), 200);
  }
  RawClient extra(port);
  const std::string answer = extra.read(5s);
  EXPECT_EQ(status_of(answer), 503) << answer;
  EXPECT_NE(answer.find("Retry-After: 1"), std::string::npos) << answer;
  EXPECT_NE(answer.find("maximum of 3 connections"), std::string::npos) << answer;
  EXPECT_EQ(http.counts().refused, 1);
  held.clear();
  // Room again once they closed.
  for (int i = 0; i < 100 && http.counts().open > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(http_request(port, "GET", "/health").status, 200);
}

}  // namespace
}  // namespace tern::testing
