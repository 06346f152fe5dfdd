// Rendering of tern router's metrics (see router_metrics.h).
#include "tern/router/router_metrics.h"

namespace tern::router {
namespace {

using server::prometheus_header;
using server::prometheus_label_value;
using server::prometheus_number;

// vLLM's time-to-first-token and end-to-end latency buckets: the prefill step is a TTFT.
const std::vector<double> kPrefillBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                             0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                             20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kRequestBuckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                             5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                             60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

std::string backend_labels(BackendRole role, const std::string& url) {
  return std::string("role=\"") + role_name(role) + "\",backend=\"" + prometheus_label_value(url) +
         "\"";
}

}  // namespace

RouterMetrics::RouterMetrics()
    : prefill_seconds_(kPrefillBuckets), request_seconds_(kRequestBuckets) {
  for (const char* kind :
       {kErrorBadRequest, kErrorNoHealthyBackend, kErrorBackendUnreachable, kErrorBackendStatus,
        kErrorMissingKvParams, kErrorBackendBrokeOff, kErrorClientDisconnected})
    errors_[kind] = 0;
}

void RouterMetrics::count_request(BackendRole role, const std::string& url, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{role_name(role), url, status}];
}

void RouterMetrics::count_error(const std::string& kind) {
  std::lock_guard lock(mutex_);
  ++errors_[kind];
}

void RouterMetrics::observe_prefill_seconds(double seconds) {
  std::lock_guard lock(mutex_);
  prefill_seconds_.observe(seconds);
}

void RouterMetrics::observe_request_seconds(double seconds) {
  std::lock_guard lock(mutex_);
  request_seconds_.observe(seconds);
}

void RouterMetrics::count_health_round() {
  std::lock_guard lock(mutex_);
  ++health_rounds_;
}

void RouterMetrics::count_prefilled_on_decode() {
  std::lock_guard lock(mutex_);
  ++prefilled_on_decode_;
}

std::string RouterMetrics::render(const std::vector<const BackendPool*>& pools) const {
  std::string out;
  std::lock_guard lock(mutex_);
  prometheus_header(out, "tern_router:requests_total", "counter",
                    "Requests sent to a backend, by the HTTP status it answered.");
  for (const auto& [key, n] : requests_) {
    const auto& [role, url, status] = key;
    out += "tern_router:requests_total{role=\"" + role + "\",backend=\"" +
           prometheus_label_value(url) + "\",status=\"" + std::to_string(status) + "\"} " +
           std::to_string(n) + "\n";
  }
  prometheus_header(out, "tern_router:requests_in_flight", "gauge",
                    "Requests a backend is serving for the router now.");
  for (const BackendPool* pool : pools)
    for (size_t i = 0; i < pool->size(); ++i)
      out += "tern_router:requests_in_flight{" +
             backend_labels(pool->role(), pool->backend(i).address.url) + "} " +
             std::to_string(pool->backend(i).in_flight.load()) + "\n";
  prometheus_header(out, "tern_router:backend_healthy", "gauge",
                    "1 while the backend is in its pool, 0 while its health checks fail.");
  for (const BackendPool* pool : pools)
    for (size_t i = 0; i < pool->size(); ++i)
      out += "tern_router:backend_healthy{" +
             backend_labels(pool->role(), pool->backend(i).address.url) + "} " +
             (pool->backend(i).healthy ? "1" : "0") + "\n";
  prometheus_header(out, "tern_router:prefill_seconds", "histogram",
                    "Seconds of the prefill step of prefill/decode requests.");
  prefill_seconds_.render(out, "tern_router:prefill_seconds", "");
  prometheus_header(out, "tern_router:request_seconds", "histogram",
                    "Seconds from a request's arrival to the end of its answer.");
  request_seconds_.render(out, "tern_router:request_seconds", "");
  prometheus_header(out, "tern_router:health_check_rounds_total", "counter",
                    "Rounds of GET /health over every backend.");
  out += "tern_router:health_check_rounds_total " + std::to_string(health_rounds_) + "\n";
  prometheus_header(out, "tern_router:prefilled_on_decode_total", "counter",
                    "Prefill/decode requests whose prompt, under --disagg-min-prompt-tokens, "
                    "went straight to a decode instance.");
  out += "tern_router:prefilled_on_decode_total " + std::to_string(prefilled_on_decode_) + "\n";
  prometheus_header(out, "tern_router:errors_total", "counter", "Failed requests, by kind.");
  for (const auto& [kind, n] : errors_)
    out += "tern_router:errors_total{kind=\"" + prometheus_label_value(kind) + "\"} " +
           prometheus_number(static_cast<double>(n)) + "\n";
  return out;
}

}  // namespace tern::router
