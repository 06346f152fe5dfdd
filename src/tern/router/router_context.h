// What the route handlers of tern router share: options, pools and metrics. Internal to
// src/tern/router.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>

#include "tern/router/backend_call.h"
#include "tern/router/backend_pool.h"
#include "tern/router/disagg_request.h"
#include "tern/router/router_metrics.h"
#include "tern/router/router_server.h"

namespace tern::router {

struct RouterContext {
  RouterOptions options;
  CallTimeouts timeouts;
  // Replica mode: `replicas` only. Prefill/decode mode: `prefill` and `decode`.
  std::unique_ptr<BackendPool> replicas, prefill, decode;
  RouterMetrics metrics;

  bool disaggregated() const { return prefill != nullptr; }
  // The pool the answer comes from (decode or replicas), for /v1/models too.
  BackendPool& answer_pool() { return disaggregated() ? *decode : *replicas; }
  std::vector<BackendPool*> pools();
  // Takes a backend out of its pool or puts it back, with a log line when it changes.
  void set_healthy(BackendPool& pool, size_t index, bool healthy, const std::string& why);
};

// An OpenAI error body on `res`.
void set_error(httplib::Response& res, int status, const std::string& message);

// POST /v1/completions and /v1/chat/completions.
void handle_generation(RouterContext& ctx, Endpoint endpoint, const httplib::Request& req,
                       httplib::Response& res);

}  // namespace tern::router
