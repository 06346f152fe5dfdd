// A backend call as a chain of Asio operations (see backend_call.h): resolve, connect, send,
// read the head, then read the body piece by piece into a fixed buffer, each step under its
// deadline, each completion on the backend loop.
#include "tern/router/backend_call.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <limits>
#include <optional>

namespace tern::router {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

bool never_sent(CallFailure failure) {
  return failure == CallFailure::Resolve || failure == CallFailure::Connect ||
         failure == CallFailure::ConnectTimeout;
}

std::string describe_call_failure(CallFailure failure, const BackendAddress& to) {
  const std::string where = to.host + ":" + std::to_string(to.port);
  switch (failure) {
    case CallFailure::Resolve:
      return "the host name of " + where + " does not resolve";
    case CallFailure::Connect:
      return "could not connect to " + where +
             " (connection refused or host unreachable: is the instance running there?)";
    case CallFailure::ConnectTimeout:
      return "no connection to " + where + " within the connect timeout";
    case CallFailure::Send:
      return "could not send the request to " + where + " (the connection closed)";
    case CallFailure::ReadTimeout:
      return where + " sent nothing within the read timeout";
    case CallFailure::Closed:
      return where + " closed the connection before its answer ended";
    case CallFailure::BadAnswer:
      return where + " answered with something that is not HTTP/1.1";
  }
  return "the call to " + where + " failed";
}

namespace {

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

// A failed read: silence past the deadline, the connection's end, or bytes that do not parse.
CallFailure read_failure(const beast::error_code& ec) {
  if (ec == beast::error::timeout) return CallFailure::ReadTimeout;
  if (ec.category() == bhttp::make_error_code(bhttp::error::end_of_stream).category() &&
      ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message)
    return CallFailure::BadAnswer;
  return CallFailure::Closed;
}

}  // namespace

struct BackendCall::Impl : std::enable_shared_from_this<BackendCall::Impl> {
  Impl(asio::io_context& loop, const BackendAddress& to, const CallTimeouts& timeouts,
       CallEvents events)
      : to(to),
        timeouts(timeouts),
        events(std::move(events)),
        resolver(loop),
        stream(loop),
        hold(loop) {}

  BackendAddress to;
  CallTimeouts timeouts;
  CallEvents events;
  tcp::resolver resolver;
  beast::tcp_stream stream;
  asio::steady_timer hold;  // waits while the owner's may_read says no
  bhttp::request<bhttp::string_body> request;
  beast::flat_buffer buffer;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser;
  char piece[16384];
  bool ended = false;  // the last event was delivered, or the call was cancelled

  void begin() {
    resolver.async_resolve(
        to.host, std::to_string(to.port),
        [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
          self->resolved(ec, results);
        });
  }

  void resolved(beast::error_code ec, const tcp::resolver::results_type& results) {
    if (ended) return;
    if (ec) return fail(CallFailure::Resolve);
    stream.expires_after(seconds(timeouts.connect_seconds));
    stream.async_connect(results,
                         [self = shared_from_this()](beast::error_code e, const tcp::endpoint&) {
                           self->connected(e);
                         });
  }

  void connected(beast::error_code ec) {
    if (ended) return;
    if (ec)
      return fail(ec == beast::error::timeout ? CallFailure::ConnectTimeout : CallFailure::Connect);
    stream.expires_after(seconds(timeouts.read_seconds));
    bhttp::async_write(stream, request,
                       [self = shared_from_this()](beast::error_code e, size_t) { self->sent(e); });
  }

  void sent(beast::error_code ec) {
    if (ended) return;
    if (ec) return fail(ec == beast::error::timeout ? CallFailure::ReadTimeout : CallFailure::Send);
    parser.emplace();
    parser->body_limit(
        std::numeric_limits<std::uint64_t>::max());  // a stream's length is the backend's to decide
    stream.expires_after(seconds(timeouts.read_seconds));
    bhttp::async_read_header(
        stream, buffer, *parser,
        [self = shared_from_this()](beast::error_code e, size_t) { self->got_head(e); });
  }

  void got_head(beast::error_code ec) {
    if (ended) return;
    if (ec) return fail(read_failure(ec));
    const auto& head = parser->get();
    CallAnswerHead answer;
    answer.status = static_cast<int>(head.result_int());
    const auto type = head.find(bhttp::field::content_type);
    if (type != head.end()) answer.content_type = std::string(type->value());
    if (events.on_head) events.on_head(answer);
    read_body();
  }

  void read_body() {
    if (ended) return;
    if (parser->is_done()) return finish();
    if (events.may_read && !events.may_read()) {
      hold.expires_after(std::chrono::milliseconds(2));
      hold.async_wait([self = shared_from_this()](beast::error_code) { self->read_body(); });
      return;
    }
    parser->get().body().data = piece;
    parser->get().body().size = sizeof(piece);
    stream.expires_after(seconds(timeouts.read_seconds));
    bhttp::async_read_some(
        stream, buffer, *parser,
        [self = shared_from_this()](beast::error_code e, size_t) { self->got_body(e); });
  }

  void got_body(beast::error_code ec) {
    if (ended) return;
    const size_t got = sizeof(piece) - parser->get().body().size;
    if (got > 0 && events.on_data) {
      events.on_data(std::string(piece, got));
      if (ended) return;  // the owner cancelled on this piece
    }
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) return fail(read_failure(ec));
    read_body();
  }

  void finish() {
    ended = true;
    close();
    CallEvents last = std::move(events);  // what the callbacks hold is let go after them
    if (last.on_end) last.on_end();
  }

  void fail(CallFailure failure) {
    ended = true;
    close();
    CallEvents last = std::move(events);
    if (last.on_failed) last.on_failed(failure);
  }

  void cancel() {
    if (ended) return;
    ended = true;
    close();
    CallEvents dropped = std::move(events);  // let go after this returns, not inside a callback
  }

  void close() {
    beast::error_code ignored;
    resolver.cancel();
    hold.cancel();
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.close();
  }
};

BackendCall BackendCall::start(asio::io_context& loop, const BackendAddress& to, std::string path,
                               std::string body, const CallHeaders& headers,
                               const CallTimeouts& timeouts, CallEvents events) {
  auto impl = std::make_shared<Impl>(loop, to, timeouts, std::move(events));
  bhttp::request<bhttp::string_body>& r = impl->request;
  r.method(bhttp::verb::post);
  r.target(path);
  r.version(11);
  r.set(bhttp::field::host, to.host + ":" + std::to_string(to.port));
  r.set(bhttp::field::connection, "close");  // one call, one connection
  bool has_type = false;
  for (const auto& [name, value] : headers) {
    r.set(name, value);
    has_type |= beast::iequals(name, "Content-Type");
  }
  if (!has_type) r.set(bhttp::field::content_type, "application/json");
  r.body() = std::move(body);
  r.prepare_payload();
  BackendCall handle(impl);
  asio::post(loop, [impl] { impl->begin(); });
  return handle;
}

void BackendCall::cancel() const {
  const std::shared_ptr<Impl> impl = impl_.lock();
  if (!impl) return;
  // At once on the loop's own thread (nothing more is delivered after it), posted from another.
  asio::dispatch(impl->stream.get_executor(), [impl] { impl->cancel(); });
}

}  // namespace tern::router
