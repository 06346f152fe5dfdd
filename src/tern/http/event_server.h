// The HTTP/1.1 server of tern serve and tern router: one event loop (Boost.Asio) owns every
// connection, so a connection costs a socket and a few KiB, not a thread; route handlers that
// may take long (parsing a prompt, waiting for a backend) run on a small worker pool, and
// answers are written by the loop as they come. Deadlines as production servers set them:
// a request's header within `header_timeout` of its first byte, its body within
// `body_timeout`, a connection with no request begun closed after `keep_alive_timeout`, a
// client that takes no bytes for `write_timeout` hung up on. Past `max_connections` a new
// connection gets a 503 and is closed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "tern/http/exchange.h"
#include "tern/http/http_message.h"
#include "tern/http/request_reader.h"

namespace tern::http {

struct ServerLimits {
  ReaderLimits reader;
  int max_connections = 4096;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};
  std::chrono::milliseconds keep_alive_timeout{5'000};
  std::chrono::milliseconds write_timeout{30'000};
  int worker_threads = 4;
};

// Where a route's handler runs. Inline: on the event loop, for handlers that answer at once
// from memory (health, metrics, models): they never wait behind anything. Worker: on the
// worker pool, for handlers that compute or block.
enum class Work { Inline, Worker };

using Handler = std::function<void(const Request&, const std::shared_ptr<Exchange>&)>;
// A handler that answers at once, by filling a Response.
Handler answer_with(std::function<void(const Request&, Response&)> fill);

struct ConnectionCounts {
  int64_t open = 0;
  int64_t accepted = 0;
  int64_t refused = 0;    // over max_connections
  int64_t timed_out = 0;  // closed by a header, body, keep-alive or write deadline
};

// A socket bound to host:port and listening, before any server exists to accept on it: a
// command binds its port first, so that a port in use fails at once and not after a model has
// loaded (vLLM binds first too); clients that connect meanwhile wait in its backlog.
class ListeningSocket {
 public:
  ListeningSocket() = default;
  ~ListeningSocket();
  ListeningSocket(ListeningSocket&& other) noexcept;
  ListeningSocket& operator=(ListeningSocket&& other) noexcept;
  ListeningSocket(const ListeningSocket&) = delete;
  ListeningSocket& operator=(const ListeningSocket&) = delete;

  int port() const { return port_; }
  bool valid() const { return fd_ >= 0; }
  // Hands the descriptor over (EventServer::adopt); this no longer owns it.
  int release();

 private:
  friend ListeningSocket listen_on(const std::string& host, int port);
  int fd_ = -1;
  int port_ = 0;
};

// Binds host:port (0: any free port) and listens. Throws tern::Error when it cannot, naming the
// port when another server has it, and for a port outside 0-65535. Also raises the process's
// limit on open files to its hard limit: every connection is one.
ListeningSocket listen_on(const std::string& host, int port);

class EventServer {
 public:
  explicit EventServer(ServerLimits limits = {});
  ~EventServer();
  EventServer(const EventServer&) = delete;
  EventServer& operator=(const EventServer&) = delete;

  // Before bind(). A request whose path has a route but not its method gets 404 from the server
  // (the error page may make it a 405).
  void route(std::string method, std::string path, Work where, Handler handler);
  // Runs on the event loop before the route (authentication): true when it answered in `res`.
  void set_request_filter(std::function<bool(const Request&, Response&)> filter);
  // Fills the body of an error answer that has none: a bad route (404), a request the reader
  // refused (400, 413, 431; `detail` says why), a connection over the limit (503, with an empty
  // request), or a handler's own bodiless status.
  void set_error_page(std::function<void(const Request&, std::string_view detail, Response&)> page);
  // The answer for an exception thrown by a handler before it answered.
  void set_exception_page(std::function<void(std::exception_ptr, Response&)> page);

  // Binds host:port (0: any free port) and listens, as listen_on; returns the port.
  int bind(const std::string& host, int port);
  // Accepts on a socket bound before (listen_on); returns its port.
  int adopt(ListeningSocket socket);
  // Serves on the bound socket until stop(); returns at once when stop() came first, and then
  // `on_start` (what must run only while serving) does not run either.
  void serve(const std::function<void()>& on_start = {});
  // Closes the listening socket: new connections are refused, the open ones served on.
  void stop_accepting();
  // Stops serving: no new connections, idle ones closed, answers under way given up to `grace`
  // to end (a stream's last pieces), then every connection closed and serve() returns. Safe from
  // any thread, more than once.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

  const ServerLimits& limits() const;
  ConnectionCounts counts() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace tern::http
