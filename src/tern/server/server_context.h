// What every route handler of the server shares: the served model, the engine front, metrics
// and options. Internal to src/tern/server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tern/server/async_engine.h"
#include "tern/server/openai_protocol.h"
#include "tern/server/openai_server.h"
#include "tern/server/server_metrics.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace tern::server {

struct ServerContext {
  explicit ServerContext(Tokenizer t) : tokenizer(std::move(t)) {}

  ServerOptions options;
  Tokenizer tokenizer;
  std::optional<ChatTemplate> chat_template;
  ModelContext model;  // points into this struct
  ServerMetrics* metrics = nullptr;
  AsyncEngine* engine = nullptr;
};

// Sets an error response (OpenAI body) on `res`.
void set_error(httplib::Response& res, int status, const std::string& message,
               const std::string& param = {});

// POST /v1/completions and /v1/chat/completions, streamed or not.
void handle_generation(ServerContext& ctx, Endpoint endpoint, const httplib::Request& req,
                       httplib::Response& res);

}  // namespace tern::server
