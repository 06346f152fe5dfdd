// What the route handlers of tern router share: options, pools and metrics. Internal to
// src/tern/router.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>

#include "tern/http/exchange.h"
#include "tern/http/http_message.h"
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
  // Where every backend call and relay runs: one thread, events only (see backend_call.h).
  boost::asio::io_context* backend_loop = nullptr;

  bool disaggregated() const { return prefill != nullptr; }
  // The pool the answer comes from (decode or replicas), for /v1/models too.
  BackendPool& answer_pool() { return disaggregated() ? *decode : *replicas; }
  std::vector<BackendPool*> pools();
  // Takes a backend out of its pool or puts it back, with a log line when it changes.
  void set_healthy(BackendPool& pool, size_t index, bool healthy, const std::string& why);
};

// An OpenAI error body on `res`.
void set_error(http::Response& res, int status, const std::string& message);

// POST /v1/completions and /v1/chat/completions, on an HTTP worker: parses the body, then the
// request goes on on the backend loop, where its answer, or the backend's stream relayed piece
// by piece, goes to `client`.
void handle_generation(RouterContext& ctx, Endpoint endpoint, const http::Request& req,
                       const std::shared_ptr<http::Exchange>& client);

}  // namespace tern::router
