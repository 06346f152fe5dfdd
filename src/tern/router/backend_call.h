// One POST to a backend, on the router's backend loop (Boost.Asio, Beast's HTTP/1.1 parser):
// no thread waits for it. Its answer arrives as events — the status line and headers, then the
// body piece by piece as the backend sends it, then its end or a failure — so that tern router
// relays a stream as it comes, holds back when its client reads slowly, and hangs up on the
// backend the moment its own client goes away (tern serve then aborts the request and frees its
// KV blocks).
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tern/router/backend_pool.h"

namespace tern::router {

struct CallTimeouts {
  double connect_seconds = 5.0;
  double read_seconds = 600.0;  // the longest silence of a backend (between two stream chunks)
};

using CallHeaders = std::vector<std::pair<std::string, std::string>>;

// Why a call ended without its whole answer.
enum class CallFailure {
  Resolve,         // the backend's host name does not resolve
  Connect,         // connection refused or host unreachable
  ConnectTimeout,  // no connection within connect_seconds
  Send,            // the connection closed while the request was sent
  ReadTimeout,     // the backend was silent for read_seconds
  Closed,          // the backend closed the connection before its answer ended
  BadAnswer,       // what came back is not HTTP/1.1
};

// Whether the request never reached the backend, so that sending it to another runs nothing twice.
bool never_sent(CallFailure failure);
// The failure in words, naming the backend: for log lines and error bodies.
std::string describe_call_failure(CallFailure failure, const BackendAddress& to);

struct CallAnswerHead {
  int status = 0;
  std::string content_type;  // empty when the backend sent none
};

// What a call tells its owner, always on the backend loop's thread. on_head once, then on_data
// any number of times, then exactly one of on_end and on_failed (on_failed may also come
// before on_head). Nothing after cancel().
struct CallEvents {
  std::function<void(const CallAnswerHead&)> on_head;
  std::function<void(std::string piece)> on_data;
  std::function<void()> on_end;
  std::function<void(CallFailure)> on_failed;
  // Asked before each read of the body: false holds the reading (and so the backend, through
  // TCP) until it turns true. Empty: always read.
  std::function<bool()> may_read;
};

// A handle on a call under way. The call keeps itself alive (its pending operation holds it)
// until its last event, or until the loop is destroyed with it pending: a handle never keeps it.
class BackendCall {
 public:
  // Starts the call on `loop`.
  static BackendCall start(boost::asio::io_context& loop, const BackendAddress& to,
                           std::string path, std::string body, const CallHeaders& headers,
                           const CallTimeouts& timeouts, CallEvents events);
  // Closes the connection to the backend and ends the events: nothing is delivered after it
  // when called on the loop's thread, nothing after it reaches the loop when called from
  // another. More than once, or after the call ended, is fine.
  void cancel() const;

 private:
  struct Impl;
  explicit BackendCall(std::weak_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::weak_ptr<Impl> impl_;
};

}  // namespace tern::router
