// What every route handler of the server shares: the served model, the engine front, metrics
// and options. Internal to src/tern/server.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tern/http/exchange.h"
#include "tern/http/http_message.h"
#include "tern/server/async_engine.h"
#include "tern/server/openai_protocol.h"
#include "tern/server/openai_server.h"
#include "tern/server/server_metrics.h"

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
void set_error(http::Response& res, int status, const std::string& message,
               const std::string& param = {});

// POST /v1/completions and /v1/chat/completions, streamed or not: answered through `exchange`
// as the engine's outputs come.
void handle_generation(ServerContext& ctx, Endpoint endpoint, const http::Request& req,
                       const std::shared_ptr<http::Exchange>& exchange);

}  // namespace tern::server
