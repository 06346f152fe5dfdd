#include "tern/server/http_server.h"

#include <sys/socket.h>

#include <chrono>
#include <thread>

#include "tern/core/error.h"

namespace tern::server {

int HttpServer::bind_listening(const std::string& host, int port) {
  if (port == 0) {
    port = bind_to_any_port(host);
    if (port < 0) throw Error("cannot listen on " + host + " (any port)");
  } else if (!bind_to_port(host, port)) {
    throw Error("cannot listen on " + host + ":" + std::to_string(port) +
                " (in use, or not an address of this machine)");
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
