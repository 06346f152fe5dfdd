#include "tern/server/http_server.h"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "tern/core/error.h"

namespace tern::server {

HttpServer::HttpServer() {
  set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0) {
      // httplib calls this with its own, non-const Request before it reads the body.
      auto& headers = const_cast<httplib::Request&>(req).headers;
      headers.erase("Content-Type");
      headers.emplace("Content-Type", "application/json");
    }
    return request_filter_ ? request_filter_(req, res) : HandlerResponse::Unhandled;
  });
}

int HttpServer::bind_listening(const std::string& host, int port) {
  if (port == 0) {
    port = bind_to_any_port(host);
    if (port < 0) throw Error("cannot listen on " + host + " (any port)");
  } else if (errno = 0; !bind_to_port(host, port)) {
    // httplib closes the socket after a failed bind, which leaves bind's errno as it was.
    if (errno == EADDRINUSE)
      throw Error("cannot listen on " + host + ":" + std::to_string(port) + ": port " +
                  std::to_string(port) + " is in use (another server listens there)");
    throw Error("cannot listen on " + host + ":" + std::to_string(port) +
                " (not an address of this machine, or not allowed)");
  }
  ::listen(svr_sock_, SOMAXCONN);
  return port;
}

void HttpServer::serve(const std::function<void()>& on_start) {
  {
    std::lock_guard lock(serve_mutex_);
    if (stop_requested_) return;
    serving_ = true;
    if (on_start) on_start();
  }
  listen_after_bind();
  serving_ = false;
}

void HttpServer::stop_serving() {
  {
    std::lock_guard lock(serve_mutex_);
    stop_requested_ = true;
  }
  while (serving_ && !is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop();
}

}  // namespace tern::server
