// The reading thread of a backend call and its hand-over buffer (see backend_call.h).
#include "tern/router/backend_call.h"

namespace tern::router {

std::string describe_http_error(httplib::Error error, const BackendAddress& to) {
  const std::string where = to.host + ":" + std::to_string(to.port);
  switch (error) {
    case httplib::Error::Connection:
      return "could not connect to " + where +
             " (connection refused or host unreachable: is the instance running there?)";
    case httplib::Error::ConnectionTimeout:
      return "no connection to " + where + " within the connect timeout";
    case httplib::Error::Read:
      return where + " closed the connection, or sent nothing within the read timeout";
    case httplib::Error::Write:
      return "could not send the request to " + where + " (the connection closed)";
    case httplib::Error::Canceled:
      return "the call to " + where + " was cancelled";
    case httplib::Error::BindIPAddress:
      return "could not bind a local address to reach " + where;
    case httplib::Error::ExceedRedirectCount:
      return where + " redirected too many times";
    case httplib::Error::Compression:
      return "could not decompress the answer of " + where;
    default:
      return "the call to " + where + " failed (httplib error " + httplib::to_string(error) + ")";
  }
}

BackendCall::BackendCall(const BackendAddress& to, std::string path, std::string body,
                         httplib::Headers headers, const CallTimeouts& timeouts)
    : client_(to.host, to.port) {
  client_.set_connection_timeout(std::chrono::duration<double>(timeouts.connect_seconds));
  client_.set_read_timeout(std::chrono::duration<double>(timeouts.read_seconds));
  client_.set_write_timeout(std::chrono::duration<double>(timeouts.read_seconds));
  client_.set_keep_alive(false);
  thread_ =
      std::thread(&BackendCall::run, this, std::move(path), std::move(body), std::move(headers));
}

BackendCall::~BackendCall() {
  cancel();
  thread_.join();
}

void BackendCall::run(std::string path, std::string body, httplib::Headers headers) {
  httplib::Request req;
  req.method = "POST";
  req.path = std::move(path);
  req.headers = std::move(headers);
  req.body = std::move(body);
  if (!req.has_header("Content-Type")) req.set_header("Content-Type", "application/json");
  req.response_handler = [this](const httplib::Response& r) {
    std::lock_guard lock(mutex_);
    status_ = r.status;
    headers_ = r.headers;
    got_headers_ = true;
    cv_.notify_all();
    return !cancelled_;
  };
  req.content_receiver = [this](const char* data, size_t len, uint64_t, uint64_t) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return cancelled_ || pending_.size() < kMaxPending; });
    if (cancelled_) return false;
    pending_.append(data, len);
    cv_.notify_all();
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool ok = client_.send(req, res, error);
  std::lock_guard lock(mutex_);
  finished_ = true;
  error_ = ok ? httplib::Error::Success
              : (error == httplib::Error::Success ? httplib::Error::Unknown : error);
  cv_.notify_all();
}

bool BackendCall::wait_for_headers() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return got_headers_ || finished_; });
  return got_headers_;
}

int BackendCall::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

std::string BackendCall::header(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const auto it = headers_.find(name);  // httplib's Headers compare names case-insensitively
  return it == headers_.end() ? std::string() : it->second;
}

httplib::Error BackendCall::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

BackendCall::Next BackendCall::next(std::string& out, std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  cv_.wait_for(lock, wait, [this] { return !pending_.empty() || finished_; });
  if (!pending_.empty()) {
    out.clear();
    out.swap(pending_);
    cv_.notify_all();  // the reading thread may wait for room
    return Next::Data;
  }
  if (!finished_) return Next::Idle;
  return error_ == httplib::Error::Success ? Next::End : Next::Failed;
}

bool BackendCall::read_all(std::string& out) {
  out.clear();
  std::string piece;
  for (;;) {
    switch (next(piece, std::chrono::milliseconds(1000))) {
      case Next::Data:
        out += piece;
        break;
      case Next::Idle:
        break;
      case Next::End:
        return true;
      case Next::Failed:
        return false;
    }
  }
}

void BackendCall::cancel() {
  {
    std::lock_guard lock(mutex_);
    if (finished_ || cancelled_) return;
    cancelled_ = true;
    cv_.notify_all();
  }
  // Shuts the socket down under the reading thread: its read fails at once.
  client_.stop();
}

}  // namespace tern::router
