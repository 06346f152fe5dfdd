// The HTTP side of `tern serve`: routes, bearer-token authentication, OpenAI error bodies for
// everything that fails (bad routes and methods, oversized bodies, exceptions), the small
// routes (models, health, version, tokenize, detokenize, metrics) and the lifecycle.
#include "tern/server/openai_server.h"

#include <httplib.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "tern/core/error.h"
#include "tern/core/version.h"
#include "tern/server/api_error.h"
#include "tern/server/http_server.h"
#include "tern/server/openai_responses.h"
#include "tern/server/request_fields.h"
#include "tern/server/server_context.h"

namespace tern::server {

using nlohmann::json;

void set_error(httplib::Response& res, int status, const std::string& message,
               const std::string& param) {
  res.status = status;
  res.set_content(dump_json(error_body(status, message, param)), "application/json");
}

namespace {

struct Route {
  const char* method;
  const char* path;
};

constexpr Route kRoutes[] = {
    {"POST", "/v1/completions"},
    {"POST", "/v1/chat/completions"},
    {"POST", "/v1/completions/render"},
    {"POST", "/v1/chat/completions/render"},
    {"GET", "/v1/models"},
    {"GET", "/health"},
    {"GET", "/version"},
    {"POST", "/tokenize"},
    {"POST", "/detokenize"},
    {"GET", "/metrics"},
    {"POST", "/reset_prefix_cache"},
};

// The routes the API key guards: /v1, as vLLM, and what changes the engine's state.
bool needs_api_key(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/reset_prefix_cache";
}

std::unique_ptr<kv_events::ZmqEventPublisher> make_kv_event_publisher(
    const kv_events::KvEventsConfig& config, const LLMEngine& engine) {
  if (!config.enabled) return nullptr;
  if (!engine.config().enable_prefix_caching)
    throw Error(
        "--kv-events-config: the events are the prefix cache's, which is off "
        "(--no-enable-prefix-caching)");
  return std::make_unique<kv_events::ZmqEventPublisher>(config);
}

const Route* find_route(const std::string& path) {
  for (const Route& r : kRoutes)
    if (path == r.path) return &r;
  return nullptr;
}

void set_json(httplib::Response& res, const json& body) {
  res.set_content(dump_json(body), "application/json");
}

}  // namespace

struct OpenAIServer::Impl {
  LLM& llm;
  ServerContext ctx;
  ServerMetrics metrics;
  std::unique_ptr<kv_events::ZmqEventPublisher> kv_event_publisher;  // outlives `engine`
  AsyncEngine engine;
  HttpServer http;
  int port = -1;
  int64_t created = static_cast<int64_t>(std::time(nullptr));
  std::once_flag stopped;

  Impl(LLM& l, ServerOptions options)
      : llm(l),
        ctx(l.tokenizer()),
        metrics(l.engine().max_model_len(), options.metric_names),
        kv_event_publisher(make_kv_event_publisher(options.kv_events, l.engine())),
        engine(l.engine(), metrics, options.log_stats_interval, options.compute_nice,
               kv_event_publisher.get()) {
    ctx.options = std::move(options);
    ctx.metrics = &metrics;
    ctx.engine = &engine;
    load_chat_template();
    ctx.model.tokenizer = &ctx.tokenizer;
    ctx.model.chat_template = ctx.chat_template ? &*ctx.chat_template : nullptr;
    ctx.model.max_model_len = l.engine().max_model_len();
    ctx.model.served_model_name = ctx.options.served_model_name;
    load_output_parsers();
    setup_http();
  }

  void load_chat_template() {
    const Tokenizer& tok = ctx.tokenizer;
    auto text = [&](std::optional<int32_t> id) {
      return id ? tok.token_bytes(*id) : std::string();
    };
    if (!ctx.options.chat_template.empty()) {
      // The user's own template must work: a broken one stops the server at start.
      ctx.chat_template.emplace(ctx.options.chat_template, text(tok.bos_id()), text(tok.eos_id()));
      return;
    }
    if (tok.chat_template().empty()) {
      ctx.model.chat_template_error = "the model has none";
      return;
    }
    try {
      ctx.chat_template.emplace(ChatTemplate::from_tokenizer(tok));
    } catch (const Error& e) {
      // The model's template uses something tern's Jinja lacks: completions still work.
      ctx.model.chat_template_error = e.what();
      std::fprintf(stderr, "tern serve: the model's chat template is unusable: %s\n", e.what());
    }
  }

  void load_output_parsers() {
    const ServerOptions& o = ctx.options;
    if (!o.tool_call_parser.empty()) {
      ctx.model.tool_call_parser = tool_call_format_from_name(o.tool_call_parser);
      if (!ctx.model.tool_call_parser)
        throw Error("--tool-call-parser: unknown parser '" + o.tool_call_parser +
                    "' (tern has hermes and llama3_json)");
    }
    if (o.enable_auto_tool_choice && !ctx.model.tool_call_parser)
      throw Error("--enable-auto-tool-choice requires --tool-call-parser");
    ctx.model.enable_auto_tool_choice = o.enable_auto_tool_choice;
    if (!o.reasoning_parser.empty()) {
      ctx.model.reasoning_parser = reasoning_format_from_name(o.reasoning_parser);
      if (!ctx.model.reasoning_parser)
        throw Error("--reasoning-parser: unknown parser '" + o.reasoning_parser +
                    "' (tern has qwen3 and deepseek_r1)");
      // Where a constraint waits for the end of reasoning: the think tags as single tokens (a
      // vocabulary without them constrains from the first token).
      auto single_token = [&](const char* tag) {
        const std::vector<int32_t> ids = ctx.tokenizer.encode(tag, false, /*parse_special=*/true);
        return ids.size() == 1 ? ids[0] : -1;
      };
      ctx.model.think_start_token = single_token("<think>");
      ctx.model.think_end_token = single_token("</think>");
    }
  }

  void setup_http();
  void tokenize(const httplib::Request& req, httplib::Response& res);
  void detokenize(const httplib::Request& req, httplib::Response& res);
  void render(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  void models(httplib::Response& res);
};

void OpenAIServer::Impl::tokenize(const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  if (body.contains("messages"))
    check_route_fields(body, tokenize_chat_fields(), "/tokenize with messages");
  else
    check_route_fields(body, tokenize_prompt_fields(), "/tokenize");
  check_model(body, ctx.model);
  std::vector<int32_t> tokens;
  if (body.contains("messages")) {
    tokens = chat_prompt_tokens(nlohmann::ordered_json::parse(req.body), ctx.model);
  } else {
    const auto prompt = body.find("prompt");
    if (prompt == body.end() || !prompt->is_string())
      throw ApiError(400, "'prompt' (a string) or 'messages' is required", "prompt");
    bool add_special = true;
    if (const auto a = body.find("add_special_tokens"); a != body.end() && !a->is_null()) {
      if (!a->is_boolean())
        throw ApiError(400, "'add_special_tokens' must be true or false", "add_special_tokens");
      add_special = a->get<bool>();
    }
    tokens = ctx.tokenizer.encode(prompt->get<std::string>(), add_special);
  }
  set_json(res, {{"count", tokens.size()},
                 {"max_model_len", ctx.model.max_model_len},
                 {"tokens", tokens},
                 {"token_strs", nullptr}});
}

void OpenAIServer::Impl::detokenize(const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  check_route_fields(body, {"model", "tokens"}, "/detokenize");
  check_model(body, ctx.model);
  const auto tokens = body.find("tokens");
  if (tokens == body.end() || !tokens->is_array())
    throw ApiError(400, "'tokens' (a list of token ids) is required", "tokens");
  std::vector<int32_t> ids;
  for (const json& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() >= ctx.tokenizer.vocab_size())
      throw ApiError(400,
                     "'tokens' must hold token ids in [0, " +
                         std::to_string(ctx.tokenizer.vocab_size() - 1) + "]",
                     "tokens");
    ids.push_back(t.get<int32_t>());
  }
  set_json(res, {{"prompt", ctx.tokenizer.decode(ids)}});
}

// vLLM's render routes (what llm-d's endpoint picker calls to learn a request's tokens for
// prefix-aware routing): the request checked exactly as generation checks it, and the prompt
// tokens generation would run, as vLLM's GenerateRequest objects (a list for completions, one
// per prompt; one object for chat). tern renders only the prompt: no sampling_params.
void OpenAIServer::Impl::render(Endpoint endpoint, const httplib::Request& req,
                                httplib::Response& res) {
  const GenerationRequest g = endpoint == Endpoint::ChatCompletions
                                  ? parse_chat_request(req.body, ctx.model)
                                  : parse_completion_request(req.body, ctx.model);
  const std::string id = new_response_id(endpoint);
  json rendered = json::array();
  for (size_t i = 0; i < g.prompts.size(); ++i)
    rendered.push_back({{"request_id", id + "-" + std::to_string(i)},
                        {"token_ids", g.prompts[i]},
                        {"features", nullptr},
                        {"model", ctx.options.served_model_name}});
  set_json(res, endpoint == Endpoint::ChatCompletions ? rendered.at(0) : rendered);
}

void OpenAIServer::Impl::models(httplib::Response& res) {
  const json card = {{"id", ctx.options.served_model_name},
                     {"object", "model"},
                     {"created", created},
                     {"owned_by", "tern"},
                     {"root", ctx.options.model_path.empty() ? ctx.options.served_model_name
                                                             : ctx.options.model_path},
                     {"parent", nullptr},
                     {"max_model_len", ctx.model.max_model_len},
                     {"permission", json::array()}};
  set_json(res, {{"object", "list"}, {"data", json::array({card})}});
}

void OpenAIServer::Impl::setup_http() {
  const int threads = std::max(4, ctx.options.http_threads);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_payload_max_length(ctx.options.max_request_body);
  // A client that stops reading is given up on after this long (its request is then aborted).
  http.set_write_timeout(30, 0);
  http.set_read_timeout(30, 0);

  // Authentication: /v1 routes, as vLLM does, and the cache reset (health and metrics stay
  // open to probes and scrapers).
  http.set_request_filter([this](const httplib::Request& req, httplib::Response& res) {
    const std::string& key = ctx.options.api_key;
    if (key.empty() || !needs_api_key(req.path)) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + key)
      return httplib::Server::HandlerResponse::Unhandled;
    set_error(res, 401, "Unauthorized");
    res.set_header("WWW-Authenticate", "Bearer");
    return httplib::Server::HandlerResponse::Handled;
  });

  // Whatever httplib or a handler answered with an error status and no body gets an OpenAI one.
  http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                     httplib::Response& res) {
    if (!res.body.empty() || res.content_length_ > 0)
      return httplib::Server::HandlerResponse::Unhandled;
    const Route* route = find_route(req.path);
    if (res.status == 404 && route) {
      res.set_header("Allow", route->method);
      set_error(
          res, 405,
          "Method Not Allowed: " + req.method + " " + req.path + " (use " + route->method + ")");
    } else if (res.status == 404) {
      set_error(res, 404, "Not Found: " + req.path);
    } else if (res.status == 413) {
      set_error(res, 413,
                "the request body is larger than the server's limit of " +
                    std::to_string(ctx.options.max_request_body) + " bytes (--max-request-body)");
    } else {
      set_error(res, res.status,
                "the HTTP request could not be served (status " + std::to_string(res.status) + ")");
    }
    return httplib::Server::HandlerResponse::Handled;
  }));

  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const ApiError& e) {
          set_error(res, e.status(), e.what(), e.param());
        } catch (const Error& e) {
          set_error(res, 400, e.what());
        } catch (const std::exception& e) {
          set_error(res, 500, std::string("internal error: ") + e.what());
        } catch (...) {
          set_error(res, 500, "internal error");
        }
      });

  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(ctx, Endpoint::Completions, req, res);
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(ctx, Endpoint::ChatCompletions, req, res);
  });
  http.Post("/v1/completions/render", [this](const httplib::Request& req, httplib::Response& res) {
    render(Endpoint::Completions, req, res);
  });
  http.Post("/v1/chat/completions/render",
            [this](const httplib::Request& req, httplib::Response& res) {
              render(Endpoint::ChatCompletions, req, res);
            });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { models(res); });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  http.Get("/version", [](const httplib::Request&, httplib::Response& res) {
    set_json(res, {{"version", kTernVersion}});
  });
  http.Post("/tokenize",
            [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
  http.Post("/detokenize",
            [this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); });
  // vLLM's route (which it serves in its dev mode): 200 when the cache was emptied, 409 while
  // requests hold blocks.
  http.Post("/reset_prefix_cache", [this](const httplib::Request&, httplib::Response& res) {
    if (!engine.reset_prefix_cache())
      set_error(res, 409,
                "the prefix cache cannot be reset while requests hold KV blocks; retry when "
                "the server is idle");
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(ctx.options.served_model_name, engine.stats()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
}

OpenAIServer::OpenAIServer(LLM& llm, ServerOptions options) {
  if (options.served_model_name.empty()) throw Error("the server needs a served model name");
  // A client that hangs up makes the next write raise SIGPIPE, which would end the process;
  // the failed write is how the server notices and aborts the request.
  std::signal(SIGPIPE, SIG_IGN);
  impl_ = std::make_unique<Impl>(llm, std::move(options));
}

OpenAIServer::~OpenAIServer() { stop(); }

int OpenAIServer::bind() {
  const auto& o = impl_->ctx.options;
  impl_->port = impl_->http.bind_listening(o.host, o.port);
  return impl_->port;
}

void OpenAIServer::serve() { impl_->http.serve(); }

void OpenAIServer::stop() {
  if (!impl_) return;
  std::call_once(impl_->stopped, [this] {
    impl_->http.stop_serving();
    impl_->engine.shutdown();  // in-flight requests end with "abort"; waiting handlers answer
  });
}

int OpenAIServer::port() const { return impl_->port; }

int64_t OpenAIServer::num_unfinished_requests() const { return impl_->engine.num_unfinished(); }

}  // namespace tern::server
