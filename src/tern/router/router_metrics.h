// tern router's own Prometheus metrics (`tern_router:` prefix): backend requests by status,
// requests in flight and health per backend, the prefill step's and whole requests' seconds,
// the short prompts the decode instances prefilled, and errors by kind.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "tern/router/backend_pool.h"
#include "tern/server/server_metrics.h"

namespace tern::router {

// The kinds of errors_total.
inline constexpr const char* kErrorBadRequest = "bad_request";  // the client's body
inline constexpr const char* kErrorNoHealthyBackend = "no_healthy_backend";
inline constexpr const char* kErrorBackendUnreachable = "backend_unreachable";
inline constexpr const char* kErrorBackendStatus = "backend_error_status";  // 4xx / 5xx passed on
inline constexpr const char* kErrorMissingKvParams = "missing_kv_transfer_params";
inline constexpr const char* kErrorBackendBrokeOff = "backend_broke_off";  // mid-answer
inline constexpr const char* kErrorClientDisconnected = "client_disconnected";

class RouterMetrics {
 public:
  RouterMetrics();

  void count_request(BackendRole role, const std::string& url, int status);
  void count_error(const std::string& kind);
  void observe_prefill_seconds(double seconds);
  void observe_request_seconds(double seconds);
  void count_health_round();
  void count_prefilled_on_decode();

  // The whole /metrics page, with the pools' gauges as they are now.
  std::string render(const std::vector<const BackendPool*>& pools) const;

 private:
  mutable std::mutex mutex_;
  // (role, url, status) → requests
  std::map<std::tuple<std::string, std::string, int>, int64_t> requests_;
  std::map<std::string, int64_t> errors_;
  int64_t health_rounds_ = 0;
  int64_t prefilled_on_decode_ = 0;
  server::Histogram prefill_seconds_, request_seconds_;
};

}  // namespace tern::router
