// A loopback TCP client that sends exactly the bytes a test gives it and reads what comes
// back: for what an HTTP client library will not do (slow headers, pipelining, hanging up,
// idling), as hostile and careless clients do.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace tern::testing {

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  RawClient(RawClient&& o) noexcept : fd_(o.fd_), connected_(o.connected_) { o.fd_ = -1; }

  bool connected() const { return connected_; }

  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // What arrives within `wait` (until the server closes, or `until` appears in it); with a
  // zero wait, what has arrived already.
  std::string read(std::chrono::milliseconds wait, std::string_view until = {}) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (fd_ >= 0 && !closed_by_peer_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) <= 0) break;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_by_peer_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
      if (!until.empty() && out.find(until) != std::string::npos) break;
    }
    return out;
  }

  // Whether the server closed the connection within `wait` (anything it sends first is read
  // and dropped).
  bool closed_by_server(std::chrono::milliseconds wait) {
    read(wait);
    return closed_by_peer_;
  }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool is_open() const { return fd_ >= 0; }
  // Whether a read found the connection closed by the server.
  bool peer_closed() const { return closed_by_peer_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_by_peer_ = false;
};

// The status of an HTTP answer's first line ("HTTP/1.1 200 OK" → 200), or -1.
inline int status_of(std::string_view answer) {
  if (answer.size() < 12 || answer.substr(0, 5) != "HTTP/") return -1;
  return std::stoi(std::string(answer.substr(9, 3)));
}

}  // namespace tern::testing
