// HttpServer, the listener of tern serve and tern router: a port in use is a start-up error
// (no second listener sharing it), and a JSON body is read whatever its Content-Type says.
#include "tern/server/http_server.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "server/server_test_util.h"
#include "tern/core/error.h"

namespace tern::testing {
namespace {

class ServingThread {
 public:
  explicit ServingThread(server::HttpServer& http) : http_(http), thread_([&] { http_.serve(); }) {}
  ~ServingThread() {
    http_.stop_serving();
    thread_.join();
  }

 private:
  server::HttpServer& http_;
  std::thread thread_;
};

TEST(HttpServer, APortInUseIsAnErrorNamingThePort) {
  server::HttpServer first;
  const int port = first.bind_listening("127.0.0.1", 0);
  server::HttpServer second;
  try {
    second.bind_listening("127.0.0.1", port);
    FAIL() << "a second server listened on port " << port;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("port " + std::to_string(port) + " is in use"),
              std::string::npos)
        << e.what();
  }
}

TEST(HttpServer, AJsonBodyIsReadWhateverItsContentTypeSays) {
  server::HttpServer http;
  std::string received;
  http.Post("/echo", [&](const httplib::Request& req, httplib::Response& res) {
    received = req.body;
    res.set_content("{}", "application/json");
  });
  http.set_payload_max_length(1 << 20);
  const int port = http.bind_listening("127.0.0.1", 0);
  ServingThread serving(http);
  // curl -d sends this type; httplib would refuse such a body past 8 KiB as a form.
  const std::string body = "{\"prompt\":\"" + std::string(9000, 'a') + "\"}";
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain", "application/json"}) {
    received.clear();
    const HttpResult r = http_request(port, "POST", "/echo", body, {{"Content-Type", type}});
    EXPECT_EQ(r.status, 200) << type;
    EXPECT_EQ(received, body) << type;
  }
}

TEST(HttpServer, TheRequestFilterStillAnswersFirst) {
  server::HttpServer http;
  http.Post("/echo", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  http.set_request_filter([](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization").empty()) {
      res.status = 401;
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  const int port = http.bind_listening("127.0.0.1", 0);
  ServingThread serving(http);
  EXPECT_EQ(http_request(port, "POST", "/echo", "{}").status, 401);
  EXPECT_EQ(http_request(port, "POST", "/echo", "{}", {{"Authorization", "Bearer x"}}).status, 200);
}

}  // namespace
}  // namespace tern::testing
