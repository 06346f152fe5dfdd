// POST /v1/completions and /v1/chat/completions through tern router: pick a backend (the
// prefill step first in prefill/decode mode, unless the prompt is short enough for the decode
// instance), send it the body, and relay its answer: SSE chunks as they arrive, other answers
// whole, errors with their status and OpenAI body. Every step is an event on the backend loop:
// a request holds no thread while its backends work or its client reads.
#include <boost/asio/post.hpp>
#include <chrono>
#include <optional>

#include "tern/core/clock.h"
#include "tern/router/router_context.h"
#include "tern/server/api_error.h"

namespace tern::router {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;

// At most this much of a stream is held for a client that reads slowly: past it the relay
// stops reading the backend, which then slows down instead of the router's memory growing.
constexpr size_t kMaxUnsent = size_t{1} << 20;

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

// One client request through the router, from its parsed body to the end of its answer. Lives
// on the backend loop (every method runs there), kept alive by the calls and callbacks that
// name it.
class Generation : public std::enable_shared_from_this<Generation> {
 public:
  Generation(RouterContext& ctx, Clock::time_point start, Endpoint endpoint, std::string path,
             ordered_json body, std::string client_bytes, CallHeaders headers,
             std::shared_ptr<http::Exchange> client)
      : ctx_(ctx),
        start_(start),
        endpoint_(endpoint),
        path_(std::move(path)),
        body_(std::move(body)),
        client_bytes_(std::move(client_bytes)),
        prompt_(prompt_key(body_, endpoint_)),
        headers_(std::move(headers)),
        client_(std::move(client)) {}

  void begin() {
    // The client's hang-up reaches the backend loop, where it ends the call under way.
    std::weak_ptr<Generation> weak = weak_from_this();
    boost::asio::io_context& loop = *ctx_.backend_loop;
    client_->on_close([weak, &loop] {
      boost::asio::post(loop, [weak] {
        if (auto self = weak.lock()) self->client_gone();
      });
    });
    if (!ctx_.disaggregated()) return send(Stage::Answer, client_bytes_);
    const size_t min_tokens = ctx_.options.disagg_min_prompt_tokens;
    if (min_tokens == 0) return send_prefill();
    if (const std::optional<size_t> count = prompt_ids_count(body_, endpoint_))
      return after_count(*count);
    count_by_tokenize();
  }

 private:
  // What the call under way is for. Count: a decode instance's /tokenize, for
  // --disagg-min-prompt-tokens. Prefill: step 1 of the two-step flow. Answer: the client's
  // answer (a replica, or step 2 on a decode instance).
  enum class Stage { Count, Prefill, Answer };

  BackendPool& pool_of(Stage stage) {
    return stage == Stage::Prefill ? *ctx_.prefill : ctx_.answer_pool();
  }

  // A string prompt or a chat is counted by a decode instance's /tokenize (its tokenizer is the
  // one the prompt will meet); when that fails, the two-step flow runs and reports whatever is
  // wrong with the request.
  void count_by_tokenize() {
    const std::optional<std::string> tokenize = tokenize_body(body_, endpoint_);
    if (!tokenize) return send_prefill();
    stage_ = Stage::Count;
    if (!take(ctx_.decode->acquire(prompt_))) return send_prefill();
    call("/tokenize", *tokenize);
  }

  // Holds `backend`'s in-flight count for the call to come; false when there is none.
  bool take(std::optional<InFlight> backend) {
    in_flight_.reset();
    if (backend) in_flight_.emplace(std::move(*backend));
    return in_flight_.has_value();
  }

  void send_prefill() { send(Stage::Prefill, prefill_body(body_, endpoint_)); }

  void after_count(size_t count) {
    if (count >= ctx_.options.disagg_min_prompt_tokens) return send_prefill();
    ctx_.metrics.count_prefilled_on_decode();  // the client's bytes, as to a replica
    send(Stage::Answer, client_bytes_);
  }

  // Sends `body` to a healthy backend of the stage's pool. A backend that cannot be reached
  // leaves the pool and the next one is tried (nothing was sent, so nothing runs twice).
  void send(Stage stage, std::string body) {
    stage_ = stage;
    stage_start_ = Clock::now();
    call_body_ = std::move(body);
    attempts_ = 0;
    unreachable_.clear();
    try_next_backend();
  }

  void try_next_backend() {
    BackendPool& pool = pool_of(stage_);
    in_flight_.reset();
    if (attempts_++ > pool.size() || !take(pool.acquire(prompt_))) {
      if (!unreachable_.empty()) return answer_error(502, "tern router: " + unreachable_);
      ctx_.metrics.count_error(kErrorNoHealthyBackend);
      return answer_error(503, std::string("tern router: no healthy ") + role_name(pool.role()) +
                                   " instance (every one fails its health check)");
    }
    call(path_, call_body_);
  }

  void call(const std::string& path, const std::string& body) {
    head_.reset();
    received_.clear();
    std::shared_ptr<Generation> self = shared_from_this();
    CallEvents events;
    events.on_head = [self](const CallAnswerHead& head) { self->got_head(head); };
    events.on_data = [self](std::string piece) { self->got_data(std::move(piece)); };
    events.on_end = [self] { self->got_end(); };
    events.on_failed = [self](CallFailure failure) { self->got_failure(failure); };
    events.may_read = [self] {
      return self->client_->unsent_bytes() <= kMaxUnsent || self->client_->closed();
    };
    call_ = BackendCall::start(*ctx_.backend_loop, in_flight_->address(), path, body, headers_,
                               ctx_.timeouts, std::move(events));
  }

  // "the decode instance http://…": the backend of the call under way.
  std::string who() {
    return std::string("the ") + role_name(pool_of(stage_).role()) + " instance " +
           in_flight_->address().url;
  }

  void got_head(const CallAnswerHead& head) {
    head_ = head;
    if (stage_ != Stage::Answer) return;
    ctx_.metrics.count_request(pool_of(stage_).role(), in_flight_->address().url, head.status);
    if (head.status != 200 || head.content_type.rfind("text/event-stream", 0) != 0) return;
    streaming_ = true;
    http::Response start;
    start.content_type = head.content_type;
    start.set_header("Cache-Control", "no-cache");
    client_->start_stream(std::move(start));
  }

  void got_data(std::string piece) {
    if (streaming_)
      client_->write(std::move(piece));
    else
      received_ += piece;
  }

  void got_end() {
    call_.reset();
    if (stage_ == Stage::Count) {
      const int status = head_ ? head_->status : 0;
      in_flight_.reset();
      const std::optional<size_t> count =
          status == 200 ? tokenize_count_of(received_) : std::nullopt;
      if (!count) return send_prefill();
      return after_count(*count);
    }
    if (stage_ == Stage::Prefill) return prefill_done();
    // The backend's in-flight count ends before the client has the answer: a client that sends
    // its next request at once must find the count already lowered.
    const std::string url = in_flight_->address().url;
    in_flight_.reset();
    if (streaming_) {
      finished();  // before the end, as answer()
      return client_->end_stream();
    }
    if (head_->status >= 400) {
      ctx_.metrics.count_error(kErrorBackendStatus);
      http::Response res;
      pass_error(res, head_->status, received_, url, head_->content_type);
      return answer(std::move(res));
    }
    http::Response res;
    res.status = head_->status;
    res.set_content(std::move(received_),
                    head_->content_type.empty() ? "application/json" : head_->content_type);
    answer(std::move(res));
  }

  // Step 1 came back whole: its kv_transfer_params go into step 2's body.
  void prefill_done() {
    const std::string url = in_flight_->address().url;
    const int status = head_->status;
    in_flight_.reset();
    ctx_.metrics.count_request(BackendRole::Prefill, url, status);
    if (status >= 400) {
      ctx_.metrics.count_error(kErrorBackendStatus);
      http::Response res;
      pass_error(res, status, received_, url, head_->content_type);
      return answer(std::move(res));
    }
    std::optional<ordered_json> params = kv_transfer_params_of(received_);
    if (!params) {
      ctx_.metrics.count_error(kErrorMissingKvParams);
      return answer_error(502, "tern router: the prefill instance " + url +
                                   " answered without kv_transfer_params; is it a prefill "
                                   "instance? (start it with tern serve --role prefill)");
    }
    ctx_.metrics.observe_prefill_seconds(seconds_since(stage_start_));
    send(Stage::Answer, decode_body(body_, *params));
  }

  void got_failure(CallFailure failure) {
    call_.reset();
    const BackendAddress address = in_flight_->address();
    const std::string why = describe_call_failure(failure, address);
    if (stage_ == Stage::Count) {
      in_flight_.reset();
      return send_prefill();
    }
    if (!head_ && never_sent(failure)) {
      // No connection: the backend leaves its pool, and the request goes to the next.
      unreachable_ = who() + " cannot be reached (" + why + ")";
      ctx_.metrics.count_error(kErrorBackendUnreachable);
      ctx_.set_healthy(pool_of(stage_), in_flight_->index(), false, why);
      return try_next_backend();
    }
    ctx_.metrics.count_error(kErrorBackendBrokeOff);
    const std::string what = who();
    in_flight_.reset();
    if (streaming_) {
      // Too late for a status: the client learns it from an error event, as tern serve's do.
      client_->write(
          "data: " +
          dump_lossy(server::error_body(
              502, "tern router: " + address.url + " broke off its stream (" + why + ")")) +
          "\n\n");
      finished();
      return client_->end_stream();
    }
    if (!head_) {
      // It took the request and then failed to answer in time (--request-timeout) or closed
      // the connection: not retried, since the request may be running there; whether the
      // backend is gone is for its health checks to say.
      return answer_error(
          502, "tern router: " + what + " did not answer: " + why + " (--request-timeout)");
    }
    answer_error(502, "tern router: " + what + " broke off its answer (" + why + ")");
  }

  // The client went away (or the router is stopping): closing the backend's connection is what
  // makes tern serve abort the request and free its KV blocks.
  void client_gone() {
    if (done_) return;
    if (call_) call_->cancel();
    call_.reset();
    in_flight_.reset();
    ctx_.metrics.count_error(kErrorClientDisconnected);
    finished();
  }

  void answer_error(int status, const std::string& message) {
    in_flight_.reset();
    http::Response res;
    set_error(res, status, message);
    answer(std::move(res));
  }

  // The time is observed before the answer goes out: a client that reads /metrics right after
  // its answer must find its request counted.
  void answer(http::Response res) {
    finished();
    client_->respond(std::move(res));
  }

  // The request's time, observed once whichever way it ended.
  void finished() {
    if (done_) return;
    done_ = true;
    ctx_.metrics.observe_request_seconds(seconds_since(start_));
  }

  RouterContext& ctx_;
  const Clock::time_point start_;
  const Endpoint endpoint_;
  const std::string path_;
  const ordered_json body_;
  const std::string client_bytes_;  // replicas get the client's bytes as they are
  const std::string prompt_;
  const CallHeaders headers_;
  const std::shared_ptr<http::Exchange> client_;

  Stage stage_ = Stage::Answer;
  Clock::time_point stage_start_;
  std::string call_body_;    // kept for the next backend when one cannot be reached
  size_t attempts_ = 0;      // backends tried for this stage
  std::string unreachable_;  // why the last one tried could not be reached
  std::optional<InFlight> in_flight_;
  std::optional<BackendCall> call_;
  std::optional<CallAnswerHead> head_;
  std::string received_;  // a whole answer's body so far
  bool streaming_ = false;
  bool done_ = false;
};

CallHeaders forwarded_headers(const http::Request& req) {
  CallHeaders h;
  if (req.has_header("Authorization")) h.emplace_back("Authorization", req.header("Authorization"));
  return h;
}

}  // namespace

void handle_generation(RouterContext& ctx, Endpoint endpoint, const http::Request& req,
                       const std::shared_ptr<http::Exchange>& client) {
  const Clock::time_point start = Clock::now();
  ordered_json body;
  try {
    body = parse_client_body(req.body);
  } catch (const server::ApiError& e) {
    ctx.metrics.count_error(kErrorBadRequest);
    http::Response res;
    set_error(res, e.status(), e.what());
    ctx.metrics.observe_request_seconds(seconds_since(start));  // before the answer, as answer()
    client->respond(std::move(res));
    return;
  }
  auto generation = std::make_shared<Generation>(ctx, start, endpoint, req.path, std::move(body),
                                                 req.body, forwarded_headers(req), client);
  boost::asio::post(*ctx.backend_loop, [generation] { generation->begin(); });
}

}  // namespace tern::router
