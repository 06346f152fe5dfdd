// cpp-httplib's server as tern serve and tern router listen with it: bound with a backlog a burst
// of clients does not overflow.
#pragma once

#include <httplib.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

namespace tern::server {

class HttpServer : public httplib::Server {
 public:
  // Binds host:port (0: any free port) and listens; returns the port. Debian's compiled
  // cpp-httplib listens with a backlog of 5: a burst of clients overflows it and their SYNs are
  // dropped (retried a second later, which some clients do not survive), so the backlog is
  // raised to SOMAXCONN (Linux lets listen() be called again on a listening socket). Throws
  // tern::Error when it cannot bind.
  int bind_listening(const std::string& host, int port);

  // Serves on the bound socket until stop_serving(); returns at once when stop_serving() came
  // first, and then `on_start` (what must run only while serving) does not run either.
  void serve(const std::function<void()>& on_start = {});
  // Stops serving (new connections are refused; streams end at their provider's next call).
  // serve() may start after this began (tests start and stop at once), so it waits until
  // httplib is running before telling it to stop.
  void stop_serving();

 private:
  std::mutex serve_mutex_;
  bool stop_requested_ = false;
  std::atomic<bool> serving_ = false;
};

}  // namespace tern::server
