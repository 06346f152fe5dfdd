// POST /v1/completions and /v1/chat/completions: parse (on an HTTP worker), submit to the engine
// thread, then answer from the HTTP event loop as the engine's outputs arrive: SSE chunks for a
// stream, the whole response once every completion has finished otherwise. No thread waits for
// the engine on a request's behalf.
#include <atomic>
#include <ctime>
#include <memory>
#include <optional>

#include "tern/core/error.h"
#include "tern/server/api_error.h"
#include "tern/server/openai_responses.h"
#include "tern/server/server_context.h"

namespace tern::server {
namespace {

void append_event(std::string& out, const nlohmann::json& data) {
  out += "data: ";
  out += dump_json(data);
  out += "\n\n";
}

http::Response error_response(int status, const std::string& message,
                              const std::string& param = {}) {
  http::Response res;
  set_error(res, status, message, param);
  return res;
}

// One request's answer under way. Its methods run on the event loop only (drain() is posted
// there by the channel's listener, the close callback runs there), so its state needs no lock.
class GenerationAnswer : public std::enable_shared_from_this<GenerationAnswer> {
 public:
  GenerationAnswer(ServerContext& ctx, std::shared_ptr<http::Exchange> exchange,
                   std::vector<std::string> request_ids, std::unique_ptr<ResponseFormatter> f,
                   Usage usage, const GenerationRequest& g, bool chat)
      : ctx_(ctx),
        exchange_(std::move(exchange)),
        request_ids_(std::move(request_ids)),
        formatter_(std::move(f)),
        usage_(usage),
        stream_(g.stream),
        include_usage_(g.include_usage),
        continuous_usage_(g.continuous_usage),
        chat_(chat),
        remaining_(static_cast<int>(request_ids_.size())),
        finals_(request_ids_.size(), std::vector<CompletionOutput>(static_cast<size_t>(g.n))) {
    for (auto& prompt : finals_)
      for (size_t k = 0; k < prompt.size(); ++k) prompt[k].index = static_cast<int32_t>(k);
  }

  // The channel the engine answers on: each push schedules one drain (pushes that come before
  // it runs share it).
  std::shared_ptr<RequestChannel> open_channel() {
    channel_ = std::make_shared<RequestChannel>([self = shared_from_this()] {
      if (!self->drain_scheduled_.exchange(true)) self->exchange_->post([self] { self->drain(); });
    });
    return channel_;
  }

  // After the submission: when the client goes away (or the server closes), the requests are
  // aborted, which frees their KV blocks at the engine's next step. Watched only once they are
  // submitted, so that the abort cannot reach the engine before them.
  void watch_client() {
    exchange_->on_close([self = shared_from_this()] {
      if (self->done_) return;
      self->end();
      self->ctx_.engine->abort(self->request_ids_);
    });
  }

  // Everything the engine has said so far.
  void drain() {
    drain_scheduled_ = false;
    if (done_) return;
    channel_->take_all(events_);
    size_t first = 0;
    if (!accepted_) {
      if (events_.empty()) return;
      const EngineEvent& e = events_.front();
      if (e.kind == EngineEvent::Kind::Rejected) {
        http::Response res = error_response(e.status, e.error);
        if (e.status == 503) res.set_header("Retry-After", "1");
        end();
        exchange_->respond(std::move(res));
        return;
      }
      accepted_ = true;
      first = 1;
      if (stream_) {
        http::Response head;
        head.content_type = "text/event-stream";
        head.set_header("Cache-Control", "no-cache");
        exchange_->start_stream(std::move(head));
      }
    }
    if (stream_)
      stream(first);
    else
      collect(first);
  }

 private:
  void stream(size_t first) {
    std::string out;
    // The chat role chunk goes out with the first output, as vLLM sends it: every client that
    // times the first chunk (vLLM's bench serve, tern's) takes it for the first token.
    if (!opened_ && first < events_.size()) {
      opened_ = true;
      if (chat_)
        for (const nlohmann::json& chunk : formatter_->chat_role_chunks()) append_event(out, chunk);
    }
    for (size_t i = first; i < events_.size(); ++i) {
      EngineEvent& e = events_[i];
      if (e.kind == EngineEvent::Kind::Failed) {
        append_event(out, error_body(500, e.error));
        remaining_ = 0;
        break;
      }
      if (e.kind != EngineEvent::Kind::Output) continue;
      for (const CompletionOutput& c : e.output.outputs) {
        usage_.completion_tokens += static_cast<int64_t>(c.new_token_ids.size());
        for (nlohmann::json& chunk : formatter_->chunks(e.prompt_index, c)) {
          // The request's usage so far, as vLLM's continuous_usage_stats gives it.
          if (continuous_usage_) chunk["usage"] = usage_json(usage_);
          append_event(out, chunk);
        }
      }
      if (e.output.finished) --remaining_;
    }
    events_.clear();
    if (remaining_ == 0) {
      if (include_usage_) append_event(out, formatter_->usage_chunk(usage_));
      out += "data: [DONE]\n\n";
    }
    exchange_->write(std::move(out));
    if (remaining_ == 0) {
      end();
      exchange_->end_stream();
    }
  }

  void collect(size_t first) {
    for (size_t i = first; i < events_.size(); ++i) {
      EngineEvent& e = events_[i];
      if (e.kind == EngineEvent::Kind::Failed) {
        ctx_.engine->abort(request_ids_);
        end();
        exchange_->respond(error_response(500, e.error));
        return;
      }
      for (CompletionOutput& c : e.output.outputs)
        if (c.finished()) {
          usage_.completion_tokens += static_cast<int64_t>(c.token_ids.size());
          finals_.at(static_cast<size_t>(e.prompt_index)).at(static_cast<size_t>(c.index)) =
              std::move(c);
        }
      if (e.output.finished) --remaining_;
      if (e.output.kv_transfer_params) held_kv_ = std::move(e.output.kv_transfer_params);
    }
    events_.clear();
    if (remaining_ > 0) return;
    nlohmann::json response = formatter_->response(finals_, usage_);
    // vLLM's field: what the router hands the decode instance as it is.
    if (held_kv_) response["kv_transfer_params"] = disagg::kv_transfer_params_json(*held_kv_);
    http::Response res;
    res.set_content(dump_json(response), "application/json");
    end();
    exchange_->respond(std::move(res));
  }

  // Nothing more to hear: the channel lets go of this answer.
  void end() {
    done_ = true;
    channel_->detach();
  }

  ServerContext& ctx_;
  std::shared_ptr<http::Exchange> exchange_;
  std::shared_ptr<RequestChannel> channel_;
  std::vector<std::string> request_ids_;
  std::unique_ptr<ResponseFormatter> formatter_;
  Usage usage_;
  bool stream_, include_usage_, continuous_usage_, chat_;
  int remaining_;                                      // prompts not finished
  std::vector<std::vector<CompletionOutput>> finals_;  // [prompt][completion], not streamed
  std::optional<disagg::RemoteBlocks> held_kv_;        // a prefill for a decode instance: where
  std::vector<EngineEvent> events_;
  std::atomic<bool> drain_scheduled_{false};
  bool accepted_ = false, opened_ = false, done_ = false;
};

}  // namespace

void handle_generation(ServerContext& ctx, Endpoint endpoint, const http::Request& req,
                       const std::shared_ptr<http::Exchange>& exchange) {
  GenerationRequest g;
  try {
    g = endpoint == Endpoint::ChatCompletions ? parse_chat_request(req.body, ctx.model)
                                              : parse_completion_request(req.body, ctx.model);
  } catch (const ApiError& e) {
    exchange->respond(error_response(e.status(), e.what(), e.param()));
    return;
  } catch (const Error& e) {  // the tokenizer's, for instance
    exchange->respond(error_response(400, e.what()));
    return;
  }

  const std::string id = new_response_id(endpoint);
  const int num_prompts = static_cast<int>(g.prompts.size());
  Usage usage;
  std::vector<EngineRequest> requests;
  std::vector<std::string> request_ids;
  for (int i = 0; i < num_prompts; ++i) {
    usage.prompt_tokens += static_cast<int64_t>(g.prompts[i].size());
    request_ids.push_back(id + "-" + std::to_string(i));
    requests.push_back({request_ids.back(), std::move(g.prompts[i]), g.params[i], g.kv});
  }
  auto formatter = std::make_unique<ResponseFormatter>(
      endpoint, id, static_cast<int64_t>(std::time(nullptr)), ctx.options.served_model_name,
      ctx.tokenizer, g.n, num_prompts, g.output);
  auto answer = std::make_shared<GenerationAnswer>(ctx, exchange, std::move(request_ids),
                                                   std::move(formatter), usage, g,
                                                   endpoint == Endpoint::ChatCompletions);
  // The engine thread answers a submission first with Accepted or Rejected.
  ctx.engine->submit(std::move(requests), answer->open_channel());
  answer->watch_client();
}

}  // namespace tern::server
