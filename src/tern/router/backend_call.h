// One POST to a backend whose answer is read on a thread of its own, so that tern router can
// relay it to its client piece by piece as it arrives, and hang up on the backend the moment
// its own client goes away (tern serve then aborts the request and frees its KV blocks).
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "tern/router/backend_pool.h"

namespace tern::router {

struct CallTimeouts {
  double connect_seconds = 5.0;
  double read_seconds = 600.0;  // the longest silence of a backend (between two stream chunks)
};

// A failed call to `to` in words, for logs and error bodies: httplib's names alone
// ("Connection", "Read") say neither what failed nor where.
std::string describe_http_error(httplib::Error error, const BackendAddress& to);

class BackendCall {
 public:
  BackendCall(const BackendAddress& to, std::string path, std::string body,
              httplib::Headers headers, const CallTimeouts& timeouts);
  ~BackendCall();  // cancels a call still running, then waits for its thread
  BackendCall(const BackendCall&) = delete;
  BackendCall& operator=(const BackendCall&) = delete;

  // Waits for the answer's status line and headers. False: the call failed before (error()).
  bool wait_for_headers();
  int status() const;
  std::string header(const std::string& name) const;
  httplib::Error error() const;

  enum class Next { Data, Idle, End, Failed };
  // Data: what arrived is moved into `out`. Idle: nothing came within `wait`. End: the whole
  // body came. Failed: the connection broke before its end (error()).
  Next next(std::string& out, std::chrono::milliseconds wait);
  // The rest of the body; false when the connection broke before its end.
  bool read_all(std::string& out);
  // Closes the connection to the backend now (thread-safe; the reading thread then ends).
  void cancel();

 private:
  void run(std::string path, std::string body, httplib::Headers headers);

  // At most this much unsent body is held: a slow client slows the backend's reading instead.
  static constexpr size_t kMaxPending = size_t{1} << 20;

  httplib::Client client_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool got_headers_ = false, finished_ = false, cancelled_ = false;
  int status_ = -1;
  httplib::Headers headers_;
  httplib::Error error_ = httplib::Error::Success;
  std::string pending_;  // body bytes not yet taken by next()
  std::thread thread_;
};

}  // namespace tern::router
