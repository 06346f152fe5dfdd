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
  // httplib binds with SO_REUSEPORT, which lets a second process listen on the same port and
  // take part of its traffic (any local user could hijack a running server that way): tern's
  // listeners bind with SO_REUSEADDR only, so a port in use is an error at start-up, while a
  // restart still binds over the old connections' TIME_WAIT.
  HttpServer();

  // What runs before a route's handler (authentication); returning Handled answers the request
  // there. Use this, not httplib's set_pre_routing_handler, which the constructor has taken to
  // accept a JSON body whatever its Content-Type says (as vLLM and llama-server do): curl's `-d`
  // sends application/x-www-form-urlencoded, which httplib would parse as a form and refuse
  // past 8 KiB with a 413.
  void set_request_filter(HandlerWithResponse filter) { request_filter_ = std::move(filter); }

  // Binds host:port (0: any free port) and listens; returns the port. Debian's compiled
  // cpp-httplib listens with a backlog of 5: a burst of clients overflows it and their SYNs are
  // dropped (retried a second later, which some clients do not survive), so the backlog is
  // raised to SOMAXCONN (Linux lets listen() be called again on a listening socket). Throws
  // tern::Error when it cannot bind, naming the port when it is in use.
  int bind_listening(const std::string& host, int port);

  // Serves on the bound socket until stop_serving(); returns at once when stop_serving() came
  // first, and then `on_start` (what must run only while serving) does not run either.
  void serve(const std::function<void()>& on_start = {});
  // Stops serving (new connections are refused; streams end at their provider's next call).
  // serve() may start after this began (tests start and stop at once), so it waits until
  // httplib is running before telling it to stop.
  void stop_serving();

 private:
  HandlerWithResponse request_filter_;
  std::mutex serve_mutex_;
  bool stop_requested_ = false;
  std::atomic<bool> serving_ = false;
};

}  // namespace tern::server
