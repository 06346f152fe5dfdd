// The HTTP side of `tern serve`: routes, bearer-token authentication, OpenAI error bodies for
// everything that fails (bad routes and methods, oversized bodies, exceptions), the small
// routes (models, health, version, tokenize, detokenize, metrics) and the lifecycle.
#include "tern/server/openai_server.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "tern/core/error.h"
#include "tern/core/version.h"
#include "tern/http/event_server.h"
#include "tern/server/api_error.h"
#include "tern/server/openai_responses.h"
#include "tern/server/request_fields.h"
#include "tern/server/server_context.h"

namespace tern::server {

using nlohmann::json;

void set_error(http::Response& res, int status, const std::string& message,
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

void set_json(http::Response& res, const json& body) {
  res.set_content(dump_json(body), "application/json");
}

// The front end's own gauges and counters (tern's names only: vLLM has none of these).
void append_connection_metrics(std::string& page, const http::ConnectionCounts& c) {
  auto sample = [&](const char* name, const char* type, const char* help, int64_t value) {
    prometheus_header(page, name, type, help);
    page += std::string(name) + " " + prometheus_number(static_cast<double>(value)) + "\n";
  };
  sample("tern:http_connections_open", "gauge", "HTTP connections open now.", c.open);
  sample("tern:http_connections_refused_total", "counter",
         "Connections refused with 503 past --max-connections.", c.refused);
  sample("tern:http_connections_timed_out_total", "counter",
         "Connections closed by a header, body, keep-alive or write deadline.", c.timed_out);
}

}  // namespace

struct OpenAIServer::Impl {
  LLM& llm;
  ServerContext ctx;
  ServerMetrics metrics;
  std::unique_ptr<kv_events::ZmqEventPublisher> kv_event_publisher;  // outlives `engine`
  AsyncEngine engine;
  http::EventServer http;
  int port = -1;
  int64_t created = static_cast<int64_t>(std::time(nullptr));
  std::once_flag stopped;

  Impl(LLM& l, ServerOptions options)
      : llm(l),
        ctx(l.tokenizer()),
        metrics(l.engine().max_model_len(), options.metric_names),
        kv_event_publisher(make_kv_event_publisher(options.kv_events, l.engine())),
        engine(l.engine(), metrics, options.log_stats_interval, options.compute_nice,
               kv_event_publisher.get(), options.max_waiting_requests),
        http(http_limits(options)) {
    ctx.options = std::move(options);
    ctx.metrics = &metrics;
    ctx.engine = &engine;
    load_chat_template();
    ctx.model.tokenizer = &ctx.tokenizer;
    ctx.model.chat_template = ctx.chat_template ? &*ctx.chat_template : nullptr;
    ctx.model.max_model_len = l.engine().max_model_len();
    ctx.model.max_model_len_limit = l.engine().max_model_len_limit();
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
                    "' (tern has hermes, llama3_json and openai)");
    }
    if (o.enable_auto_tool_choice && !ctx.model.tool_call_parser)
      throw Error("--enable-auto-tool-choice requires --tool-call-parser");
    ctx.model.enable_auto_tool_choice = o.enable_auto_tool_choice;
    if (!o.reasoning_parser.empty()) {
      ctx.model.reasoning_parser = reasoning_format_from_name(o.reasoning_parser);
      if (!ctx.model.reasoning_parser)
        throw Error("--reasoning-parser: unknown parser '" + o.reasoning_parser +
                    "' (tern has qwen3, deepseek_r1 and openai_gptoss)");
    }
    // The openai tool parser reads harmony messages, which only the channel split leaves (vLLM
    // splits gpt-oss's channels without being asked, so its users pass no reasoning parser).
    if (ctx.model.tool_call_parser == ToolCallFormat::Openai) {
      if (!ctx.model.reasoning_parser)
        ctx.model.reasoning_parser = ReasoningFormat::GptOss;
      else if (*ctx.model.reasoning_parser != ReasoningFormat::GptOss)
        throw Error(
            "--tool-call-parser openai reads gpt-oss's harmony channels: it takes "
            "--reasoning-parser openai_gptoss (or none), not " +
            o.reasoning_parser);
    }
    if (ctx.model.reasoning_parser) {
      // Where a constraint waits for the end of reasoning: the think tags as single tokens (a
      // vocabulary without them constrains from the first token). Harmony's reasoning ends with
      // a sequence of tokens, not one, so openai_gptoss constrains from the first token too.
      if (*ctx.model.reasoning_parser == ReasoningFormat::GptOss) return;
      auto single_token = [&](const char* tag) {
        const std::vector<int32_t> ids = ctx.tokenizer.encode(tag, false, /*parse_special=*/true);
        return ids.size() == 1 ? ids[0] : -1;
      };
      ctx.model.think_start_token = single_token("<think>");
      ctx.model.think_end_token = single_token("</think>");
    }
  }

  static http::ServerLimits http_limits(const ServerOptions& o) {
    http::ServerLimits l;
    l.reader.max_body_bytes = o.max_request_body;
    l.worker_threads = std::max(1, o.http_threads);
    l.max_connections = o.max_connections;
    l.header_timeout = o.header_timeout;
    l.body_timeout = o.body_timeout;
    l.keep_alive_timeout = o.keep_alive_timeout;
    l.write_timeout = o.write_timeout;
    return l;
  }

  void setup_http();
  void tokenize(const http::Request& req, http::Response& res);
  void detokenize(const http::Request& req, http::Response& res);
  void render(Endpoint endpoint, const http::Request& req, http::Response& res);
  void models(http::Response& res);
};

void OpenAIServer::Impl::tokenize(const http::Request& req, http::Response& res) {
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

void OpenAIServer::Impl::detokenize(const http::Request& req, http::Response& res) {
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
void OpenAIServer::Impl::render(Endpoint endpoint, const http::Request& req, http::Response& res) {
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

void OpenAIServer::Impl::models(http::Response& res) {
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
  // Authentication: /v1 routes, as vLLM does, and the cache reset (health and metrics stay
  // open to probes and scrapers).
  http.set_request_filter([this](const http::Request& req, http::Response& res) {
    const std::string& key = ctx.options.api_key;
    if (key.empty() || !needs_api_key(req.path)) return false;
    if (req.header("Authorization") == "Bearer " + key) return false;
    set_error(res, 401, "Unauthorized");
    res.set_header("WWW-Authenticate", "Bearer");
    return true;
  });

  // Whatever the server or a handler answered with an error status and no body gets an OpenAI
  // one.
  http.set_error_page([this](const http::Request& req, std::string_view detail,
                             http::Response& res) {
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
    } else if (res.status == 503 && req.method.empty()) {
      set_error(res, 503, std::string(detail) + " (--max-connections); retry later");
    } else if (!detail.empty()) {
      set_error(res, res.status, std::string(detail));
    } else {
      set_error(res, res.status,
                "the HTTP request could not be served (status " + std::to_string(res.status) + ")");
    }
  });

  http.set_exception_page([](std::exception_ptr ep, http::Response& res) {
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

  using http::answer_with;
  using http::Work;
  // Generation, rendering and tokenizing compute (a long prompt's template and tokens): on the
  // workers. The rest answers from memory on the event loop, so probes and scrapes never wait
  // behind a slow client or a busy engine.
  http.route("POST", "/v1/completions", Work::Worker,
             [this](const http::Request& req, const std::shared_ptr<http::Exchange>& ex) {
               handle_generation(ctx, Endpoint::Completions, req, ex);
             });
  http.route("POST", "/v1/chat/completions", Work::Worker,
             [this](const http::Request& req, const std::shared_ptr<http::Exchange>& ex) {
               handle_generation(ctx, Endpoint::ChatCompletions, req, ex);
             });
  http.route("POST", "/v1/completions/render", Work::Worker,
             answer_with([this](const http::Request& req, http::Response& res) {
               render(Endpoint::Completions, req, res);
             }));
  http.route("POST", "/v1/chat/completions/render", Work::Worker,
             answer_with([this](const http::Request& req, http::Response& res) {
               render(Endpoint::ChatCompletions, req, res);
             }));
  http.route("GET", "/v1/models", Work::Inline,
             answer_with([this](const http::Request&, http::Response& res) { models(res); }));
  http.route("GET", "/health", Work::Inline,
             answer_with([](const http::Request&, http::Response& res) { res.status = 200; }));
  http.route("GET", "/version", Work::Inline,
             answer_with([](const http::Request&, http::Response& res) {
               set_json(res, {{"version", kTernVersion}});
             }));
  http.route(
      "POST", "/tokenize", Work::Worker,
      answer_with([this](const http::Request& req, http::Response& res) { tokenize(req, res); }));
  http.route(
      "POST", "/detokenize", Work::Worker,
      answer_with([this](const http::Request& req, http::Response& res) { detokenize(req, res); }));
  // vLLM's route (which it serves in its dev mode): 200 when the cache was emptied, 409 while
  // requests hold blocks. It waits for the engine thread's next turn: a worker's job.
  http.route("POST", "/reset_prefix_cache", Work::Worker,
             answer_with([this](const http::Request&, http::Response& res) {
               if (!engine.reset_prefix_cache())
                 set_error(res, 409,
                           "the prefix cache cannot be reset while requests hold KV blocks; "
                           "retry when the server is idle");
             }));
  http.route("GET", "/metrics", Work::Inline,
             answer_with([this](const http::Request&, http::Response& res) {
               std::string page = metrics.render(ctx.options.served_model_name, engine.stats());
               if (ctx.options.metric_names != MetricNames::Vllm)
                 append_connection_metrics(page, http.counts());
               res.set_content(std::move(page), "text/plain; version=0.0.4; charset=utf-8");
             }));
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
  return adopt(http::listen_on(o.host, o.port));
}

int OpenAIServer::adopt(http::ListeningSocket socket) {
  impl_->port = impl_->http.adopt(std::move(socket));
  return impl_->port;
}

void OpenAIServer::serve() { impl_->http.serve(); }

void OpenAIServer::stop() {
  if (!impl_) return;
  std::call_once(impl_->stopped, [this] {
    impl_->http.stop_accepting();
    // In-flight requests end with "abort": their streams get their last chunks and [DONE], the
    // others their responses, which the event loop is given a moment to write.
    impl_->engine.shutdown();
    impl_->http.stop(std::chrono::seconds(5));
  });
}

int OpenAIServer::port() const { return impl_->port; }

int64_t OpenAIServer::num_unfinished_requests() const { return impl_->engine.num_unfinished(); }

}  // namespace tern::server
