// The backends of tern router (tern serve instances) grouped in pools by role: their addresses,
// health and requests in flight, and the policy that picks one for each request.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tern/router/routing_policy.h"

namespace tern::router {

struct BackendAddress {
  std::string url;  // as given, without a trailing '/'
  std::string host;
  int port = 80;
};

// "http://host[:port][/]"; throws tern::Error naming the URL when it is anything else.
BackendAddress parse_backend_url(const std::string& url);

enum class BackendRole { Replica, Prefill, Decode };
const char* role_name(BackendRole role);  // "replica", "prefill", "decode"

struct Backend {
  BackendAddress address;
  std::atomic<bool> healthy = true;  // until a check or a request says otherwise
  std::atomic<int64_t> in_flight = 0;
};

class BackendPool;

// A request counted in flight on one backend until this ends (RAII).
class InFlight {
 public:
  InFlight(BackendPool* pool, size_t index);
  ~InFlight();
  InFlight(InFlight&& other) noexcept;
  InFlight& operator=(InFlight&&) = delete;
  InFlight(const InFlight&) = delete;
  size_t index() const { return index_; }
  const BackendAddress& address() const;

 private:
  BackendPool* pool_;
  size_t index_;
};

class BackendPool {
 public:
  BackendPool(BackendRole role, const std::vector<std::string>& urls,
              std::unique_ptr<RoutingPolicy> policy);

  // A healthy backend for a request whose prompt is `prompt`, chosen by the policy and counted in
  // flight from now on; none when no backend of the pool is healthy.
  std::optional<InFlight> acquire(std::string_view prompt);
  // Returns whether the health changed.
  bool set_healthy(size_t index, bool healthy);
  bool any_healthy() const;

  BackendRole role() const { return role_; }
  size_t size() const { return backends_.size(); }
  const Backend& backend(size_t index) const { return *backends_.at(index); }

 private:
  friend class InFlight;
  BackendRole role_;
  std::vector<std::unique_ptr<Backend>> backends_;
  mutable std::mutex mutex_;  // serializes picks, so each sees the loads of the ones before
  std::unique_ptr<RoutingPolicy> policy_;
};

}  // namespace tern::router
