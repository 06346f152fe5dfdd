#include "tern/http/event_server.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tern/core/error.h"
#include "tern/http/response_writer.h"

namespace tern::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using error_code = boost::system::error_code;

Handler answer_with(std::function<void(const Request&, Response&)> fill) {
  return [fill = std::move(fill)](const Request& req, const std::shared_ptr<Exchange>& ex) {
    Response res;
    fill(req, res);
    ex->respond(std::move(res));
  };
}

// The loop's own types: named, since EventServer::Impl holds them (an anonymous namespace in a
// member's type would give Impl internal linkage).
namespace event_loop {

class Connection;

struct Route {
  std::string method;
  std::string path;
  Work where;
  Handler handler;
};

// A client that hung up on a connection being closed for good gets this long to take the
// answer's last bytes before its unread input makes the close a reset.
constexpr std::chrono::milliseconds kLingerTime{2000};
// After a failed accept (out of file descriptors): the pause before the next try.
constexpr std::chrono::milliseconds kAcceptRetry{50};

}  // namespace event_loop

// What the loop, the connections and the exchanges share.
using event_loop::Connection;
using event_loop::kAcceptRetry;
using event_loop::Route;

struct EventServer::Impl {
  explicit Impl(ServerLimits l)
      : limits(l),
        io(std::make_shared<asio::io_context>(1)),
        workers(static_cast<size_t>(std::max(1, l.worker_threads))),
        acceptor(std::in_place, *io),
        accept_retry(std::in_place, *io) {}
  // The loop goes first: the handlers it still holds own connections, which count themselves
  // out of `open` as they go.
  ~Impl() {
    accept_retry.reset();
    acceptor.reset();
    io.reset();
  }

  ServerLimits limits;
  std::vector<Route> routes;
  std::function<bool(const Request&, Response&)> filter;
  std::function<void(const Request&, std::string_view, Response&)> error_page;
  std::function<void(std::exception_ptr, Response&)> exception_page;

  std::shared_ptr<asio::io_context> io;
  asio::thread_pool workers;
  // Optional only so that ~Impl destroys them before the loop they belong to.
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> accept_retry;
  // Every open connection (the loop's thread only).
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections;
  bool stopping = false;  // the loop's thread only

  std::atomic<int64_t> open{0}, accepted{0}, refused{0}, timed_out{0};
  std::atomic<int64_t> busy{0};  // connections with an answer under way

  std::mutex serve_mutex;
  bool stop_requested = false;
  bool serving = false;
  bool workers_joined = false;

  const Route* find_route(const Request& req) const {
    for (const Route& r : routes)
      if (r.path == req.path && r.method == req.method) return &r;
    return nullptr;
  }

  void fill_error_page(const Request& req, std::string_view detail, Response& res) const {
    if (res.status >= 400 && res.body.empty() && error_page) error_page(req, detail, res);
  }

  void accept();
  void refuse(tcp::socket socket);
  void close_connections(bool idle_only);
};

namespace event_loop {

// The exchange of one request: hands what the handler gives to its connection on the loop.
class ConnectionExchange final : public Exchange,
                                 public std::enable_shared_from_this<ConnectionExchange> {
 public:
  ConnectionExchange(std::weak_ptr<Connection> connection, std::weak_ptr<asio::io_context> io,
                     Request head)
      : connection_(std::move(connection)), io_(std::move(io)), head_(std::move(head)) {}

  void respond(Response response) override;
  void start_stream(Response head) override;
  void write(std::string piece) override;
  void end_stream() override;

  void on_close(std::function<void()> callback) override {
    std::unique_lock lock(mutex_);
    if (finished_) return;
    if (closed_) {
      lock.unlock();
      post(std::move(callback));
      return;
    }
    on_close_ = std::move(callback);
  }

  void post(std::function<void()> task) override {
    if (const std::shared_ptr<asio::io_context> io = io_.lock()) asio::post(*io, std::move(task));
  }

  size_t unsent_bytes() const override { return unsent_.load(); }

  bool closed() const override {
    std::lock_guard lock(mutex_);
    return closed_;
  }

  // Whether respond() or start_stream() was called (a handler's exception comes too late then).
  bool answered() const { return answered_.load(); }
  const Request& head() const { return head_; }

  // The loop: the connection closed before the answer ended.
  void notify_closed() {
    std::function<void()> callback;
    {
      std::lock_guard lock(mutex_);
      if (closed_ || finished_) return;
      closed_ = true;
      callback = std::move(on_close_);
    }
    if (callback) callback();
  }
  // The loop: the answer was handed whole to the connection. What on_close held is let go.
  void mark_finished() {
    std::function<void()> dropped;
    std::lock_guard lock(mutex_);
    finished_ = true;
    dropped.swap(on_close_);
  }
  void sent(size_t bytes) { unsent_ -= bytes; }

 private:
  template <typename F>
  void on_connection(F f);

  std::weak_ptr<Connection> connection_;
  std::weak_ptr<asio::io_context> io_;
  Request head_;  // method, target, path and version; no body
  mutable std::mutex mutex_;
  std::function<void()> on_close_;
  bool closed_ = false, finished_ = false;
  std::atomic<bool> answered_{false};
  std::atomic<size_t> unsent_{0};
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, EventServer::Impl& server)
      : socket_(std::move(socket)),
        server_(server),
        reader_(server.limits.reader),
        read_timer_(*server.io),
        write_timer_(*server.io) {
    ++server_.open;
  }
  ~Connection() { --server_.open; }

  void start() {
    error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);  // SSE pieces go out as they come
    arm_read_deadline();
    read();
  }

  bool answering() const { return current_ != nullptr; }

  // The loop's side of ConnectionExchange.
  void answer(ConnectionExchange* ex, Response response) {
    if (closed_ || ex != current_.get() || head_sent_) return;
    server_.fill_error_page(ex->head(), {}, response);
    const bool keep = keep_alive_ && !server_.stopping;
    std::string bytes = serialize_head(response, Framing::Length, keep);
    bytes += response.body;
    keep_alive_ = keep;
    send(std::move(bytes));
    finish_answer();
  }

  void open_stream(ConnectionExchange* ex, Response head) {
    if (closed_ || ex != current_.get() || head_sent_) return;
    head_sent_ = true;
    // An HTTP/1.0 client knows no chunks: its stream ends when the connection does.
    framing_ = ex->head().version >= 11 ? Framing::Chunked : Framing::UntilClose;
    std::string bytes = serialize_head(head, framing_, keep_alive_);
    if (framing_ == Framing::UntilClose) keep_alive_ = false;
    const size_t credit = head.body.size();
    bytes += framing_ == Framing::Chunked ? chunk(head.body) : head.body;
    send(std::move(bytes), credit);
  }

  void stream_piece(ConnectionExchange* ex, std::string piece) {
    if (closed_ || ex != current_.get() || !head_sent_) return;
    const size_t credit = piece.size();
    send(framing_ == Framing::Chunked ? chunk(piece) : std::move(piece), credit);
  }

  void close_stream(ConnectionExchange* ex) {
    if (closed_ || ex != current_.get() || !head_sent_) return;
    if (framing_ == Framing::Chunked) send(std::string(kLastChunk));
    if (server_.stopping) keep_alive_ = false;
    finish_answer();
  }

  // Closes now: the answer under way, if any, learns it through its exchange.
  void close() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    read_timer_.cancel();
    write_timer_.cancel();
    server_.connections.erase(this);
    if (current_) {
      std::shared_ptr<ConnectionExchange> ex = std::move(current_);
      --server_.busy;
      ex->notify_closed();
    }
  }

 private:
  void read() {
    if (closed_ || reading_ || lingering_ || held_ || held_failure_) return;
    reading_ = true;
    socket_.async_read_some(
        asio::buffer(read_buffer_),
        [self = shared_from_this()](error_code ec, size_t n) { self->on_read(ec, n); });
  }

  void on_read(error_code ec, size_t n) {
    reading_ = false;
    if (closed_) return;
    if (lingering_) {
      if (ec)
        close();
      else
        read_to_linger();
      return;
    }
    if (ec) {
      // The client hung up (or the socket failed): an answer under way is given up.
      close();
      return;
    }
    const bool was_started = reader_.started();
    reader_.append(std::string_view(read_buffer_.data(), n));
    if (!was_started) request_began_ = Clock::now();
    process();
    if (closed_) return;
    arm_read_deadline();
    read();
  }

  // Takes every complete request of what has arrived, one at a time: a request that comes while
  // another is answered waits (pipelining), and reading stops until it is its turn.
  void process() {
    while (!closed_ && !held_ && !held_failure_) {
      const bool header_before = reader_.header_complete();
      const RequestReader::State state = reader_.parse();
      if (!header_before && reader_.header_complete()) header_done_ = Clock::now();
      if (state == RequestReader::State::NeedMore) {
        if (!current_ && reader_.expects_continue() && !continue_sent_) {
          continue_sent_ = true;
          send("HTTP/1.1 100 Continue\r\n\r\n");
        }
        return;
      }
      if (state == RequestReader::State::Failed) {
        if (current_)
          held_failure_ = true;
        else
          refuse_request();
        return;
      }
      Request req = reader_.take();
      continue_sent_ = false;
      request_began_ = Clock::now();  // bytes left over begin the next request now
      if (current_) {
        held_ = std::move(req);
        held_keep_alive_ = reader_.keep_alive();
        return;
      }
      keep_alive_ = reader_.keep_alive();
      dispatch(std::move(req));
      if (current_) return;  // answered later; the next request waits
    }
  }

  void refuse_request() {
    Response res;
    res.status = reader_.error_status();
    server_.fill_error_page(reader_.failed_request(), reader_.error_message(), res);
    std::string bytes = serialize_head(res, Framing::Length, false);
    bytes += res.body;
    keep_alive_ = false;
    send(std::move(bytes));
    close_after_write_ = true;
  }

  void dispatch(Request req) {
    Request head;
    head.method = req.method;
    head.target = req.target;
    head.path = req.path;
    head.version = req.version;
    auto ex = std::make_shared<ConnectionExchange>(weak_from_this(), server_.io, std::move(head));
    current_ = ex;
    head_sent_ = false;
    ++server_.busy;
    arm_read_deadline();

    Response res;
    try {
      if (server_.filter && server_.filter(req, res)) {
        answer(ex.get(), std::move(res));
        return;
      }
    } catch (...) {
      Response error;
      if (server_.exception_page) server_.exception_page(std::current_exception(), error);
      answer(ex.get(), std::move(error));
      return;
    }
    const Route* route = server_.find_route(req);
    if (!route) {
      res.status = 404;
      answer(ex.get(), std::move(res));
      return;
    }
    if (route->where == Work::Inline) {
      run_handler(route->handler, req, ex, server_);
      return;
    }
    asio::post(server_.workers,
               [handler = &route->handler, req = std::move(req), ex, &server = server_]() mutable {
                 run_handler(*handler, req, ex, server);
               });
  }

  static void run_handler(const Handler& handler, const Request& req,
                          const std::shared_ptr<ConnectionExchange>& ex,
                          EventServer::Impl& server) {
    try {
      handler(req, ex);
    } catch (...) {
      if (ex->answered()) return;
      Response error;
      error.status = 500;
      if (server.exception_page) server.exception_page(std::current_exception(), error);
      ex->respond(std::move(error));
    }
  }

  void finish_answer() {
    current_->mark_finished();
    current_.reset();
    --server_.busy;
    head_sent_ = false;
    if (!keep_alive_) {
      close_after_write_ = true;
      if (!writing_) linger_close();
      return;
    }
    // The next request (held, or still to come) is taken up on a fresh turn of the loop: an
    // inline answer must not recurse into the next one.
    asio::post(*server_.io, [self = shared_from_this()] { self->resume(); });
  }

  void resume() {
    if (closed_ || current_) return;
    if (held_) {
      Request req = std::move(*held_);
      held_.reset();
      keep_alive_ = held_keep_alive_;
      dispatch(std::move(req));
      if (current_) return;
    }
    if (held_failure_) {
      held_failure_ = false;
      refuse_request();
      return;
    }
    process();
    if (closed_) return;
    arm_read_deadline();
    read();
  }

  // The deadline of what the connection waits for now: the next request to begin
  // (keep-alive), a begun header, a body. None while an answer is under way and no next
  // request has begun: the connection is read then only to notice a hang-up.
  void arm_read_deadline() {
    if (closed_ || lingering_) return;
    std::optional<Clock::time_point> deadline;
    const ServerLimits& l = server_.limits;
    if (!reader_.started()) {
      if (!current_) deadline = Clock::now() + l.keep_alive_timeout;
    } else if (!reader_.header_complete()) {
      deadline = request_began_ + l.header_timeout;
    } else {
      deadline = header_done_ + l.body_timeout;
    }
    if (!deadline) {
      read_timer_.cancel();
      read_deadline_ = {};
      return;
    }
    if (deadline == read_deadline_) return;
    read_deadline_ = *deadline;
    read_timer_.expires_at(*deadline);
    read_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->closed_ || Clock::now() < self->read_deadline_) return;
      ++self->server_.timed_out;
      self->close();
    });
  }

  void send(std::string bytes, size_t credit = 0) {
    if (closed_) return;
    out_ += bytes;
    out_credit_ += credit;
    if (credit > 0) credit_to_ = current_;
    if (!writing_) write_next();
  }

  void write_next() {
    if (out_.empty()) {
      writing_ = false;
      if (close_after_write_) linger_close();
      return;
    }
    writing_ = true;
    in_flight_.swap(out_);
    out_.clear();
    in_flight_credit_ = out_credit_;
    out_credit_ = 0;
    write_timer_.expires_after(server_.limits.write_timeout);
    write_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->closed_ || !self->writing_) return;
      ++self->server_.timed_out;  // the client takes nothing: given up on
      self->close();
    });
    asio::async_write(socket_, asio::buffer(in_flight_),
                      [self = shared_from_this()](error_code ec, size_t) { self->on_written(ec); });
  }

  void on_written(error_code ec) {
    write_timer_.cancel();
    if (in_flight_credit_ > 0 && credit_to_) credit_to_->sent(in_flight_credit_);
    in_flight_credit_ = 0;
    if (closed_) return;
    if (ec) {
      close();
      return;
    }
    write_next();
  }

  // A connection ends after its last answer: no more sending, and what the client still sends
  // is read and dropped for a moment, so that the close is no reset that could destroy the
  // answer before the client read it.
  void linger_close() {
    if (closed_ || lingering_) return;
    lingering_ = true;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    read_timer_.expires_after(kLingerTime);
    read_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->close();
    });
    read_to_linger();
  }

  void read_to_linger() {
    if (closed_ || reading_) return;
    reading_ = true;
    socket_.async_read_some(
        asio::buffer(read_buffer_),
        [self = shared_from_this()](error_code ec, size_t n) { self->on_read(ec, n); });
  }

  tcp::socket socket_;
  EventServer::Impl& server_;
  RequestReader reader_;
  std::array<char, 4096> read_buffer_;
  asio::steady_timer read_timer_, write_timer_;
  Clock::time_point read_deadline_{}, request_began_{}, header_done_{};

  std::shared_ptr<ConnectionExchange> current_;  // the request being answered
  bool head_sent_ = false;                       // of a streamed answer
  Framing framing_ = Framing::Chunked;
  bool keep_alive_ = true;
  std::optional<Request> held_;  // a pipelined request, waiting for current_ to end
  bool held_keep_alive_ = true;
  bool held_failure_ = false;  // a pipelined request the reader refused
  bool continue_sent_ = false;

  std::string out_, in_flight_;                   // bytes to write; bytes being written
  size_t out_credit_ = 0, in_flight_credit_ = 0;  // streamed piece bytes among them
  std::shared_ptr<ConnectionExchange> credit_to_;
  bool writing_ = false, reading_ = false;
  bool close_after_write_ = false, lingering_ = false, closed_ = false;
};

template <typename F>
void ConnectionExchange::on_connection(F f) {
  post([self = shared_from_this(), f = std::move(f)]() mutable {
    if (const std::shared_ptr<Connection> c = self->connection_.lock()) f(*c, self.get());
  });
}

void ConnectionExchange::respond(Response response) {
  answered_ = true;
  on_connection([r = std::move(response)](Connection& c, ConnectionExchange* ex) mutable {
    c.answer(ex, std::move(r));
  });
}

void ConnectionExchange::start_stream(Response head) {
  answered_ = true;
  unsent_ += head.body.size();
  on_connection([h = std::move(head)](Connection& c, ConnectionExchange* ex) mutable {
    c.open_stream(ex, std::move(h));
  });
}

void ConnectionExchange::write(std::string piece) {
  if (piece.empty()) return;
  unsent_ += piece.size();
  on_connection([p = std::move(piece)](Connection& c, ConnectionExchange* ex) mutable {
    c.stream_piece(ex, std::move(p));
  });
}

void ConnectionExchange::end_stream() {
  on_connection([](Connection& c, ConnectionExchange* ex) { c.close_stream(ex); });
}

}  // namespace event_loop

void EventServer::Impl::accept() {
  acceptor->async_accept([this](error_code ec, tcp::socket socket) {
    if (!acceptor->is_open() || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of file descriptors, most likely: the open connections are served on, and
      // accepting resumes in a moment (at once would spin).
      accept_retry->expires_after(kAcceptRetry);
      accept_retry->async_wait([this](error_code e) {
        if (!e) accept();
      });
      return;
    }
    ++accepted;
    if (open.load() >= limits.max_connections) {
      refuse(std::move(socket));
    } else {
      auto c = std::make_shared<Connection>(std::move(socket), *this);
      connections.emplace(c.get(), c);
      c->start();
    }
    accept();
  });
}

void EventServer::Impl::refuse(tcp::socket socket) {
  ++refused;
  Response res;
  res.status = 503;
  res.set_header("Retry-After", "1");
  fill_error_page(
      Request{},
      "the server holds its maximum of " + std::to_string(limits.max_connections) + " connections",
      res);
  const std::string bytes = serialize_head(res, Framing::Length, false) + res.body;
  // Best effort and never blocking: the loop serves everyone else.
  error_code ec;
  socket.non_blocking(true, ec);
  std::array<char, 4096> drain;
  socket.read_some(asio::buffer(drain), ec);
  asio::write(socket, asio::buffer(bytes), ec);
  socket.shutdown(tcp::socket::shutdown_send, ec);
  socket.close(ec);
}

void EventServer::Impl::close_connections(bool idle_only) {
  std::vector<std::shared_ptr<Connection>> to_close;
  for (const auto& [raw, weak] : connections)
    if (std::shared_ptr<Connection> c = weak.lock(); c && (!idle_only || !c->answering()))
      to_close.push_back(std::move(c));
  for (const std::shared_ptr<Connection>& c : to_close) c->close();
}

EventServer::EventServer(ServerLimits limits) : impl_(std::make_shared<Impl>(limits)) {}

EventServer::~EventServer() { stop(); }

void EventServer::route(std::string method, std::string path, Work where, Handler handler) {
  impl_->routes.push_back({std::move(method), std::move(path), where, std::move(handler)});
}

void EventServer::set_request_filter(std::function<bool(const Request&, Response&)> filter) {
  impl_->filter = std::move(filter);
}

void EventServer::set_error_page(
    std::function<void(const Request&, std::string_view, Response&)> page) {
  impl_->error_page = std::move(page);
}

void EventServer::set_exception_page(std::function<void(std::exception_ptr, Response&)> page) {
  impl_->exception_page = std::move(page);
}

namespace {

// Every connection is a file descriptor, and Linux's default soft limit (1,024) is far below
// what an event loop holds: raised to the hard limit, as servers do.
void raise_open_file_limit() {
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) == 0 && l.rlim_cur < l.rlim_max) {
    l.rlim_cur = l.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &l);
  }
}

}  // namespace

ListeningSocket::~ListeningSocket() {
  if (fd_ >= 0) ::close(fd_);
}

ListeningSocket::ListeningSocket(ListeningSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(other.port_) {}

ListeningSocket& ListeningSocket::operator=(ListeningSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
  }
  return *this;
}

int ListeningSocket::release() { return std::exchange(fd_, -1); }

ListeningSocket listen_on(const std::string& host, int port) {
  if (port < 0 || port > 65535)
    throw Error("cannot listen on port " + std::to_string(port) + ": a port is 0-65535");
  raise_open_file_limit();
  asio::io_context io;
  error_code ec;
  tcp::resolver resolver(io);
  const auto endpoints = resolver.resolve(
      host, std::to_string(port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty())
    throw Error("cannot listen on " + host + ":" + std::to_string(port) + " (" +
                (ec ? ec.message() : std::string("no such address")) + ")");
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  tcp::acceptor acceptor(io);
  acceptor.open(endpoint.protocol(), ec);
  if (ec) throw Error("cannot listen on " + host + ": " + ec.message());
  // SO_REUSEADDR, never SO_REUSEPORT: a port in use is an error at start-up (no second process
  // takes part of this one's traffic), while a restart still binds over the old connections'
  // TIME_WAIT.
  acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  acceptor.bind(endpoint, ec);
  if (ec) {
    if (ec == asio::error::address_in_use)
      throw Error("cannot listen on " + host + ":" + std::to_string(port) + ": port " +
                  std::to_string(port) + " is in use (another server listens there)");
    throw Error("cannot listen on " + host + ":" + std::to_string(port) +
                " (not an address of this machine, or not allowed)");
  }
  // A burst of clients must not overflow the backlog (their SYNs would be dropped).
  acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw Error("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  ListeningSocket socket;
  socket.port_ = acceptor.local_endpoint().port();
  socket.fd_ = acceptor.release();
  return socket;
}

int EventServer::bind(const std::string& host, int port) { return adopt(listen_on(host, port)); }

int EventServer::adopt(ListeningSocket socket) {
  Impl& s = *impl_;
  const int port = socket.port();
  int fd = socket.release();
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  error_code ec;
  s.acceptor->assign(address.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
  if (ec) {
    ::close(fd);
    throw Error("cannot accept on port " + std::to_string(port) + ": " + ec.message());
  }
  return port;
}

void EventServer::serve(const std::function<void()>& on_start) {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.serve_mutex);
    if (s.stop_requested) return;
    s.serving = true;
    if (on_start) on_start();
  }
  asio::post(*s.io, [&s] { s.accept(); });
  s.io->run();
  std::lock_guard lock(s.serve_mutex);
  s.serving = false;
}

void EventServer::stop_accepting() {
  Impl& s = *impl_;
  std::lock_guard lock(s.serve_mutex);
  if (!s.serving) {
    error_code ignored;
    s.acceptor->close(ignored);
    return;
  }
  asio::post(*s.io, [&s] {
    error_code ignored;
    s.acceptor->close(ignored);
    s.accept_retry->cancel();
  });
}

void EventServer::stop(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  bool was_serving = false;
  {
    std::lock_guard lock(s.serve_mutex);
    if (s.stop_requested && !s.serving) {
      if (!s.workers_joined) {
        s.workers.join();
        s.workers_joined = true;
      }
      return;
    }
    s.stop_requested = true;
    was_serving = s.serving;
  }
  if (was_serving) {
    asio::post(*s.io, [&s] {
      s.stopping = true;
      error_code ignored;
      s.acceptor->close(ignored);
      s.accept_retry->cancel();
      s.close_connections(/*idle_only=*/true);
    });
    const Clock::time_point until = Clock::now() + grace;
    while (s.busy.load() > 0 && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // Handlers still running on the workers see their connections closed and end.
    asio::post(*s.io, [&s] { s.close_connections(/*idle_only=*/false); });
    s.workers.join();
    s.io->stop();
  } else {
    error_code ignored;
    s.acceptor->close(ignored);
    s.workers.join();
  }
  std::lock_guard lock(s.serve_mutex);
  s.workers_joined = true;
}

const ServerLimits& EventServer::limits() const { return impl_->limits; }

ConnectionCounts EventServer::counts() const {
  return {impl_->open.load(), impl_->accepted.load(), impl_->refused.load(),
          impl_->timed_out.load()};
}

}  // namespace tern::http
