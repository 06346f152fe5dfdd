// POST /v1/completions and /v1/chat/completions: parse, submit to the engine thread, then
// either collect the whole response or stream SSE chunks as the engine's outputs arrive.
#include <httplib.h>

#include <chrono>
#include <ctime>
#include <memory>

#include "tern/core/error.h"
#include "tern/server/api_error.h"
#include "tern/server/openai_responses.h"
#include "tern/server/server_context.h"

namespace tern::server {
namespace {

using namespace std::chrono_literals;

// What a streaming response keeps between calls of its content provider.
struct StreamState {
  std::shared_ptr<RequestChannel> channel;
  std::vector<std::string> request_ids;
  std::unique_ptr<ResponseFormatter> formatter;
  AsyncEngine* engine = nullptr;
  Usage usage;
  bool include_usage = false;
  bool chat = false;
  bool opened = false;
  int remaining = 0;  // prompts not finished
  std::vector<EngineEvent> events;
};

void append_event(std::string& out, const nlohmann::json& data) {
  out += "data: ";
  out += dump_json(data);
  out += "\n\n";
}

// One call of the content provider: what arrived within a short wait, written as SSE events.
// False (the connection is dropped) when the client cannot be written to; the releaser then
// aborts the request.
bool stream_step(StreamState& s, httplib::DataSink& sink) {
  std::string out;
  // Outputs that came with the acceptance are written first; then what arrives within a short
  // wait, so that httplib checks for a server shutdown between calls.
  if (s.events.empty()) s.channel->pop_all(s.events, 100ms);
  // The chat role chunk goes out with the first output, as vLLM sends it: every client that
  // times the first chunk (vLLM's bench serve, tern's) takes it for the first token, so sent
  // when the stream opened it made the TTFT of a prefill over the 100 ms wait about 100 ms.
  if (!s.opened && !s.events.empty()) {
    s.opened = true;
    if (s.chat)
      for (const nlohmann::json& chunk : s.formatter->chat_role_chunks()) append_event(out, chunk);
  }
  for (EngineEvent& e : s.events) {
    if (e.kind == EngineEvent::Kind::Failed) {
      append_event(out, error_body(500, e.error));
      s.remaining = 0;
      break;
    }
    if (e.kind != EngineEvent::Kind::Output) continue;
    for (const CompletionOutput& c : e.output.outputs) {
      s.usage.completion_tokens += static_cast<int64_t>(c.new_token_ids.size());
      for (const nlohmann::json& chunk : s.formatter->chunks(e.prompt_index, c))
        append_event(out, chunk);
    }
    if (e.output.finished) --s.remaining;
  }
  s.events.clear();
  if (s.remaining == 0) {
    if (s.include_usage) append_event(out, s.formatter->usage_chunk(s.usage));
    out += "data: [DONE]\n\n";
  }
  if (!out.empty() && !sink.write(out.data(), out.size())) return false;
  if (s.remaining == 0) sink.done();
  return true;
}

}  // namespace

void handle_generation(ServerContext& ctx, Endpoint endpoint, const httplib::Request& req,
                       httplib::Response& res) {
  GenerationRequest g;
  try {
    g = endpoint == Endpoint::ChatCompletions ? parse_chat_request(req.body, ctx.model)
                                              : parse_completion_request(req.body, ctx.model);
  } catch (const ApiError& e) {
    set_error(res, e.status(), e.what(), e.param());
    return;
  } catch (const Error& e) {  // the tokenizer's, for instance
    set_error(res, 400, e.what());
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
  auto channel = std::make_shared<RequestChannel>();
  ctx.engine->submit(std::move(requests), channel);

  // The engine thread answers a submission first with Accepted or Rejected.
  std::vector<EngineEvent> events;
  while (!channel->pop_all(events, 1s)) {
  }
  if (events.front().kind == EngineEvent::Kind::Rejected) {
    set_error(res, 400, events.front().error);
    return;
  }
  events.erase(events.begin());

  auto formatter = std::make_unique<ResponseFormatter>(
      endpoint, id, static_cast<int64_t>(std::time(nullptr)), ctx.options.served_model_name,
      ctx.tokenizer, g.n, num_prompts, g.output);
  if (g.stream) {
    auto state = std::make_shared<StreamState>();
    state->channel = channel;
    state->request_ids = request_ids;
    state->formatter = std::move(formatter);
    state->engine = ctx.engine;
    state->usage = usage;
    state->include_usage = g.include_usage;
    state->chat = endpoint == Endpoint::ChatCompletions;
    state->remaining = num_prompts;
    // Outputs that came with the acceptance: kept here, not pushed back into the channel,
    // where the engine thread may already have queued later ones behind them.
    state->events = std::move(events);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [state](size_t, httplib::DataSink& sink) { return stream_step(*state, sink); },
        [state](bool success) {
          // The client went away or the server is stopping: free the request's KV now.
          if (!success || state->remaining > 0) state->engine->abort(state->request_ids);
        });
    return;
  }

  // Not streamed: wait for every completion's final output. A client that leaves meanwhile is
  // noticed only when the response is written (httplib gives a handler no socket to watch).
  std::vector<std::vector<CompletionOutput>> finals(
      static_cast<size_t>(num_prompts), std::vector<CompletionOutput>(static_cast<size_t>(g.n)));
  for (auto& prompt : finals)
    for (size_t k = 0; k < prompt.size(); ++k) prompt[k].index = static_cast<int32_t>(k);
  int remaining = num_prompts;
  std::optional<disagg::RemoteBlocks> held_kv;  // a prefill for a decode instance: where
  for (;;) {
    for (EngineEvent& e : events) {
      if (e.kind == EngineEvent::Kind::Failed) {
        ctx.engine->abort(request_ids);
        set_error(res, 500, e.error);
        return;
      }
      for (CompletionOutput& c : e.output.outputs)
        if (c.finished()) {
          usage.completion_tokens += static_cast<int64_t>(c.token_ids.size());
          finals.at(static_cast<size_t>(e.prompt_index)).at(static_cast<size_t>(c.index)) =
              std::move(c);
        }
      if (e.output.finished) --remaining;
      if (e.output.kv_transfer_params) held_kv = std::move(e.output.kv_transfer_params);
    }
    if (remaining == 0) break;
    channel->pop_all(events, 1s);
  }
  nlohmann::json response = formatter->response(finals, usage);
  // vLLM's field: what the router hands the decode instance as it is.
  if (held_kv) response["kv_transfer_params"] = disagg::kv_transfer_params_json(*held_kv);
  res.set_content(dump_json(response), "application/json");
}

}  // namespace tern::server
