// POST /v1/completions and /v1/chat/completions through tern router: pick a backend (the
// prefill step first in prefill/decode mode, unless the prompt is short enough for the decode
// instance), send it the body, and relay its answer: SSE chunks as they arrive, other answers
// whole, errors with their status and OpenAI body.
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "tern/core/clock.h"
#include "tern/router/router_context.h"
#include "tern/server/api_error.h"

namespace tern::router {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;

// A backend call under way, counted in flight on its backend while this lives.
struct Dispatched {
  InFlight in_flight;
  std::unique_ptr<BackendCall> call;
};

// Sends `body` to a healthy backend of `pool`; a backend that cannot be reached leaves the pool
// and the next one is tried (nothing was sent, so nothing runs twice). Without an answer: sets
// the 503 (no healthy backend) or 502 (unreachable, named) on `res` and returns none.
std::optional<Dispatched> dispatch(RouterContext& ctx, BackendPool& pool, const std::string& path,
                                   const std::string& body, const std::string& prompt,
                                   const httplib::Headers& headers, http::Response& res) {
  std::string failure;
  for (size_t attempt = 0; attempt <= pool.size(); ++attempt) {
    std::optional<InFlight> in_flight = pool.acquire(prompt);
    if (!in_flight) break;
    auto call =
        std::make_unique<BackendCall>(in_flight->address(), path, body, headers, ctx.timeouts);
    if (call->wait_for_headers()) return Dispatched{std::move(*in_flight), std::move(call)};
    const httplib::Error error = call->error();
    const std::string url = in_flight->address().url;
    const std::string who = std::string("the ") + role_name(pool.role()) + " instance " + url;
    if (error != httplib::Error::Connection && error != httplib::Error::ConnectionTimeout) {
      // It took the request and then failed to answer in time (--request-timeout) or closed
      // the connection: not retried, since the request may be running there; whether the
      // backend is gone is for its health checks to say.
      ctx.metrics.count_error(kErrorBackendBrokeOff);
      failure = who + " did not answer: " + describe_http_error(error, in_flight->address()) +
                " (--request-timeout)";
      break;
    }
    // No connection: the backend leaves its pool, and the request (never sent) goes to the next.
    const std::string why = describe_http_error(error, in_flight->address());
    failure = who + " cannot be reached (" + why + ")";
    ctx.metrics.count_error(kErrorBackendUnreachable);
    ctx.set_healthy(pool, in_flight->index(), false, why);
  }
  if (!failure.empty()) {
    set_error(res, 502, "tern router: " + failure);
  } else {
    ctx.metrics.count_error(kErrorNoHealthyBackend);
    set_error(res, 503,
              std::string("tern router: no healthy ") + role_name(pool.role()) +
                  " instance (every one fails its health check)");
  }
  return std::nullopt;
}

// A backend's 4xx / 5xx: its status, and its body when that is an OpenAI error (tern serve's
// always is); any other body is wrapped in one that names the backend.
void pass_error(http::Response& res, int status, const std::string& body, const std::string& url,
                const std::string& content_type) {
  const ordered_json j = ordered_json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    res.status = status;
    res.set_content(body, content_type.empty() ? "application/json" : content_type);
    return;
  }
  set_error(res, status,
            url + " answered status " + std::to_string(status) + ": " + body.substr(0, 500));
}

// The whole answer of a call that came with headers: passed on as it is.
void relay_whole(RouterContext& ctx, BackendRole role, Dispatched& d, http::Response& res) {
  const std::string url = d.in_flight.address().url;
  std::string body;
  if (!d.call->read_all(body)) {
    ctx.metrics.count_error(kErrorBackendBrokeOff);
    set_error(res, 502,
              "tern router: the " + std::string(role_name(role)) + " instance " + url +
                  " broke off its answer (" +
                  describe_http_error(d.call->error(), d.in_flight.address()) + ")");
    return;
  }
  const int status = d.call->status();
  const std::string content_type = d.call->header("Content-Type");
  if (status >= 400) {
    ctx.metrics.count_error(kErrorBackendStatus);
    pass_error(res, status, body, url, content_type);
    return;
  }
  res.status = status;
  res.set_content(body, content_type.empty() ? "application/json" : content_type);
}

// At most this much of a stream is held for a client that reads slowly: past it the relay
// stops reading the backend, which then slows down instead of the router's memory growing.
constexpr size_t kMaxUnsent = size_t{1} << 20;

// Relays a backend's SSE stream to the client piece by piece, on this (worker) thread, until
// it ends, breaks or the client goes away. The backend's in-flight count ends (`d` is let go)
// before the client has the stream's end: a client that sends its next request at once must
// find the count already lowered.
void relay_stream(RouterContext& ctx, Dispatched dispatched, Clock::time_point start,
                  const std::string& content_type, http::Exchange& client) {
  std::optional<Dispatched> d(std::move(dispatched));
  http::Response head;
  head.content_type = content_type;
  head.set_header("Cache-Control", "no-cache");
  client.start_stream(std::move(head));
  std::string piece;
  bool ended = false;
  while (!ended && !client.closed()) {
    switch (d->call->next(piece, std::chrono::milliseconds(100))) {
      case BackendCall::Next::Data:
        client.write(std::move(piece));
        piece.clear();
        while (client.unsent_bytes() > kMaxUnsent && !client.closed())
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        break;
      case BackendCall::Next::Idle:
        break;
      case BackendCall::Next::End:
        ended = true;
        d.reset();
        client.end_stream();
        break;
      case BackendCall::Next::Failed: {
        // Too late for a status: the client learns it from an error event, as tern serve's do.
        ended = true;
        ctx.metrics.count_error(kErrorBackendBrokeOff);
        client.write(
            "data: " +
            dump_lossy(server::error_body(
                502, "tern router: " + d->in_flight.address().url + " broke off its stream (" +
                         describe_http_error(d->call->error(), d->in_flight.address()) + ")")) +
            "\n\n");
        d.reset();
        client.end_stream();
        break;
      }
    }
  }
  if (!ended) {
    // The client went away or the router is stopping: closing the backend's connection is
    // what makes tern serve abort the request and free its KV blocks.
    d->call->cancel();
    ctx.metrics.count_error(kErrorClientDisconnected);
  }
  ctx.metrics.observe_request_seconds(seconds_since(start));
}

httplib::Headers forwarded_headers(const http::Request& req) {
  httplib::Headers h;
  if (req.has_header("Authorization")) h.emplace("Authorization", req.header("Authorization"));
  return h;
}

// Step 1 of the disaggregated flow: the prefill instance's kv_transfer_params, or none with the
// client's answer set on `res`.
std::optional<ordered_json> run_prefill(RouterContext& ctx, Endpoint endpoint,
                                        const std::string& path, const ordered_json& body,
                                        const std::string& prompt, const httplib::Headers& headers,
                                        http::Response& res) {
  const Clock::time_point start = Clock::now();
  std::optional<Dispatched> d =
      dispatch(ctx, *ctx.prefill, path, prefill_body(body, endpoint), prompt, headers, res);
  if (!d) return std::nullopt;
  const std::string url = d->in_flight.address().url;
  std::string answer;
  if (!d->call->read_all(answer)) {
    ctx.metrics.count_error(kErrorBackendBrokeOff);
    set_error(res, 502,
              "tern router: the prefill instance " + url + " broke off its answer (" +
                  describe_http_error(d->call->error(), d->in_flight.address()) + ")");
    return std::nullopt;
  }
  const int status = d->call->status();
  ctx.metrics.count_request(BackendRole::Prefill, url, status);
  if (status >= 400) {
    ctx.metrics.count_error(kErrorBackendStatus);
    pass_error(res, status, answer, url, d->call->header("Content-Type"));
    return std::nullopt;
  }
  std::optional<ordered_json> params = kv_transfer_params_of(answer);
  if (!params) {
    ctx.metrics.count_error(kErrorMissingKvParams);
    set_error(res, 502,
              "tern router: the prefill instance " + url +
                  " answered without kv_transfer_params; is it a prefill instance? (start it "
                  "with tern serve --role prefill)");
    return std::nullopt;
  }
  ctx.metrics.observe_prefill_seconds(seconds_since(start));
  return params;
}

// Whether the request takes the two-step flow: always, but for a prompt known to be shorter
// than --disagg-min-prompt-tokens. A string prompt or a chat is counted by a decode instance's
// /tokenize (its tokenizer is the one the prompt will meet); when that fails, the two-step flow
// runs and reports whatever is wrong with the request.
bool wants_prefill_instance(RouterContext& ctx, Endpoint endpoint, const ordered_json& body,
                            const std::string& prompt, const httplib::Headers& headers) {
  const size_t min_tokens = ctx.options.disagg_min_prompt_tokens;
  if (min_tokens == 0) return true;
  std::optional<size_t> count = prompt_ids_count(body, endpoint);
  if (!count) {
    const std::optional<std::string> tokenize = tokenize_body(body, endpoint);
    if (!tokenize) return true;
    std::optional<InFlight> in_flight = ctx.decode->acquire(prompt);
    if (!in_flight) return true;
    BackendCall call(in_flight->address(), "/tokenize", *tokenize, headers, ctx.timeouts);
    std::string answer;
    if (!call.wait_for_headers() || !call.read_all(answer) || call.status() != 200) return true;
    count = tokenize_count_of(answer);
  }
  return !count || *count >= min_tokens;
}

}  // namespace

void handle_generation(RouterContext& ctx, Endpoint endpoint, const http::Request& req,
                       const std::shared_ptr<http::Exchange>& client) {
  const Clock::time_point start = Clock::now();
  http::Response res;
  // Answers `res` unless the request went to a stream; the request's time is observed here
  // for everything but a stream, whose relay observes it at its end.
  auto answer = [&] {
    ctx.metrics.observe_request_seconds(seconds_since(start));
    client->respond(std::move(res));
  };
  ordered_json body;
  try {
    body = parse_client_body(req.body);
  } catch (const server::ApiError& e) {
    ctx.metrics.count_error(kErrorBadRequest);
    set_error(res, e.status(), e.what());
    answer();
    return;
  }
  const std::string prompt = prompt_key(body, endpoint);
  const httplib::Headers headers = forwarded_headers(req);

  // Replicas get the client's bytes as they are; the decode step gets them plus the params.
  std::string answer_body = req.body;
  if (ctx.disaggregated()) {
    if (wants_prefill_instance(ctx, endpoint, body, prompt, headers)) {
      std::optional<ordered_json> params =
          run_prefill(ctx, endpoint, req.path, body, prompt, headers, res);
      if (!params) {
        answer();
        return;
      }
      answer_body = decode_body(std::move(body), *params);
    } else {
      ctx.metrics.count_prefilled_on_decode();  // the client's bytes, as to a replica
    }
  }

  BackendPool& pool = ctx.answer_pool();
  std::optional<Dispatched> d = dispatch(ctx, pool, req.path, answer_body, prompt, headers, res);
  if (!d) {
    answer();
    return;
  }
  const int status = d->call->status();
  ctx.metrics.count_request(pool.role(), d->in_flight.address().url, status);
  const std::string content_type = d->call->header("Content-Type");
  if (status == 200 && content_type.rfind("text/event-stream", 0) == 0) {
    relay_stream(ctx, std::move(*d), start, content_type, *client);
    return;
  }
  relay_whole(ctx, pool.role(), *d, res);
  d.reset();  // the in-flight count ends before the client has its answer (see relay_stream)
  answer();
}

}  // namespace tern::router
