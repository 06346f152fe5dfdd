// tern router's HTTP side: configuration, routes (/v1/completions, /v1/chat/completions,
// /v1/models, /health, /metrics), OpenAI error bodies, the health checker and the lifecycle.
#include "tern/router/router_server.h"

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <thread>

#include "tern/core/error.h"
#include "tern/http/event_server.h"
#include "tern/router/backend_probe.h"
#include "tern/router/router_context.h"
#include "tern/server/api_error.h"

namespace tern::router {

void set_error(http::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(dump_lossy(server::error_body(status, message)), "application/json");
}

std::vector<BackendPool*> RouterContext::pools() {
  if (disaggregated()) return {prefill.get(), decode.get()};
  return {replicas.get()};
}

void RouterContext::set_healthy(BackendPool& pool, size_t index, bool healthy,
                                const std::string& why) {
  if (!pool.set_healthy(index, healthy) || !options.log) return;
  const std::string& url = pool.backend(index).address.url;
  if (healthy)
    std::fprintf(stderr, "tern router: %s instance %s is healthy again\n", role_name(pool.role()),
                 url.c_str());
  else
    std::fprintf(stderr, "tern router: %s instance %s leaves its pool (%s)\n",
                 role_name(pool.role()), url.c_str(), why.c_str());
}

struct RouterServer::Impl {
  RouterContext ctx;
  // Declared after ctx: a relay still pending when the loop goes holds a backend's in-flight
  // count, which the pool must outlive.
  boost::asio::io_context backend_loop;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> backend_work =
      boost::asio::make_work_guard(backend_loop);
  std::thread backend_thread;
  http::EventServer http;
  int port = -1;
  std::once_flag stopped;
  // The health checker: a round of checks every interval, woken early by stop().
  std::thread health_thread;
  std::mutex health_mutex;
  std::condition_variable health_cv;
  bool health_stop = false;

  explicit Impl(RouterOptions options) : http(http_limits(options)) {
    ctx.options = std::move(options);
    configure();
    setup_http();
    ctx.backend_loop = &backend_loop;
    backend_thread = std::thread([this] { backend_loop.run(); });
  }

  // Workers parse request bodies and ask backends for /v1/models; relays run on the backend
  // loop and hold none.
  static http::ServerLimits http_limits(const RouterOptions& o) {
    http::ServerLimits l;
    l.reader.max_body_bytes = o.max_request_body;
    l.worker_threads = std::max(1, o.http_threads);
    return l;
  }

  void configure();
  void setup_http();
  void check_health();
  void health_loop();
  void models(const http::Request& req, http::Response& res);
};

void RouterServer::Impl::configure() {
  const RouterOptions& o = ctx.options;
  const bool pd = !o.prefill_urls.empty() || !o.decode_urls.empty();
  if (pd && !o.backend_urls.empty())
    throw Error(
        "give either --prefill and --decode (disaggregated) or --backend (replicas), "
        "not both");
  if (pd && (o.prefill_urls.empty() || o.decode_urls.empty()))
    throw Error("prefill/decode mode needs at least one --prefill and one --decode URL");
  if (!pd && o.backend_urls.empty())
    throw Error(
        "give the backends: --backend URL... (replicas) or --prefill URL... --decode URL...");
  if (!pd && o.disagg_min_prompt_tokens > 0)
    throw Error("--disagg-min-prompt-tokens applies to prefill/decode mode (--prefill, --decode)");
  if (!(o.health_check_interval > 0)) throw Error("--health-check-interval must be > 0 seconds");
  if (!(o.request_timeout > 0)) throw Error("--request-timeout must be > 0 seconds");
  ctx.timeouts.connect_seconds = o.connect_timeout;
  ctx.timeouts.read_seconds = o.request_timeout;
  auto pool = [&](BackendRole role, const std::vector<std::string>& urls) {
    return std::make_unique<BackendPool>(role, urls,
                                         make_policy(o.policy, urls.size(), o.prefix_aware));
  };
  if (pd) {
    ctx.prefill = pool(BackendRole::Prefill, o.prefill_urls);
    ctx.decode = pool(BackendRole::Decode, o.decode_urls);
  } else {
    ctx.replicas = pool(BackendRole::Replica, o.backend_urls);
  }
}

void RouterServer::Impl::check_health() {
  // Short timeouts: a hung backend must not hold up the checks of the others for long.
  const std::chrono::duration<double> timeout(
      std::clamp(ctx.options.health_check_interval, 1.0, 5.0));
  for (BackendPool* pool : ctx.pools())
    for (size_t i = 0; i < pool->size(); ++i) {
      const BackendAddress& a = pool->backend(i).address;
      httplib::Client client(a.host, a.port);
      client.set_connection_timeout(timeout);
      client.set_read_timeout(timeout);
      const httplib::Result r = client.Get("/health");
      const bool ok = r && r->status == 200;
      ctx.set_healthy(*pool, i, ok,
                      r ? "GET /health answered " + std::to_string(r->status)
                        : "GET /health: " + describe_http_error(r.error(), a));
    }
}

void RouterServer::Impl::health_loop() {
  const auto interval = std::chrono::duration<double>(ctx.options.health_check_interval);
  std::unique_lock lock(health_mutex);
  while (!health_stop) {
    lock.unlock();
    check_health();
    ctx.metrics.count_health_round();
    lock.lock();
    health_cv.wait_for(lock, interval, [this] { return health_stop; });
  }
}

void RouterServer::Impl::models(const http::Request& req, http::Response& res) {
  BackendPool& pool = ctx.answer_pool();
  for (size_t i = 0; i < pool.size(); ++i) {
    if (!pool.backend(i).healthy) continue;
    const BackendAddress& a = pool.backend(i).address;
    httplib::Client client(a.host, a.port);
    client.set_connection_timeout(std::chrono::duration<double>(ctx.options.connect_timeout));
    httplib::Headers headers;
    if (req.has_header("Authorization"))
      headers.emplace("Authorization", req.header("Authorization"));
    const httplib::Result r = client.Get("/v1/models", headers);
    if (!r) {
      ctx.metrics.count_error(kErrorBackendUnreachable);
      ctx.set_healthy(pool, i, false, "GET /v1/models: " + describe_http_error(r.error(), a));
      continue;
    }
    res.status = r->status;
    res.set_content(r->body, r->get_header_value("Content-Type", 0).empty()
                                 ? "application/json"
                                 : r->get_header_value("Content-Type"));
    return;
  }
  ctx.metrics.count_error(kErrorNoHealthyBackend);
  set_error(res, 503,
            std::string("tern router: no healthy ") + role_name(pool.role()) + " instance");
}

void RouterServer::Impl::setup_http() {
  http.set_error_page([this](const http::Request& req, std::string_view detail,
                             http::Response& res) {
    if (res.status == 404)
      set_error(res, 404, "Not Found: " + req.method + " " + req.path);
    else if (res.status == 413)
      set_error(res, 413,
                "the request body is larger than the router's limit of " +
                    std::to_string(ctx.options.max_request_body) + " bytes");
    else if (!detail.empty())
      set_error(res, res.status, "tern router: " + std::string(detail));
    else
      set_error(res, res.status,
                "the HTTP request could not be served (status " + std::to_string(res.status) + ")");
  });
  http.set_exception_page([](std::exception_ptr ep, http::Response& res) {
    try {
      std::rethrow_exception(ep);
    } catch (const server::ApiError& e) {
      set_error(res, e.status(), e.what());
    } catch (const std::exception& e) {
      set_error(res, 500, std::string("tern router: internal error: ") + e.what());
    } catch (...) {
      set_error(res, 500, "tern router: internal error");
    }
  });

  using http::answer_with;
  using http::Work;
  // What calls a backend runs on a worker; health and metrics answer from memory on the event
  // loop, so probes never wait behind streams or a hung backend.
  http.route("POST", "/v1/completions", Work::Worker,
             [this](const http::Request& req, const std::shared_ptr<http::Exchange>& ex) {
               handle_generation(ctx, Endpoint::Completions, req, ex);
             });
  http.route("POST", "/v1/chat/completions", Work::Worker,
             [this](const http::Request& req, const std::shared_ptr<http::Exchange>& ex) {
               handle_generation(ctx, Endpoint::ChatCompletions, req, ex);
             });
  http.route(
      "GET", "/v1/models", Work::Worker,
      answer_with([this](const http::Request& req, http::Response& res) { models(req, res); }));
  http.route("GET", "/health", Work::Inline,
             answer_with([this](const http::Request&, http::Response& res) {
               for (BackendPool* pool : ctx.pools())
                 if (!pool->any_healthy()) {
                   set_error(res, 503,
                             std::string("tern router: no healthy ") + role_name(pool->role()) +
                                 " instance");
                   return;
                 }
               res.status = 200;
             }));
  http.route("GET", "/metrics", Work::Inline,
             answer_with([this](const http::Request&, http::Response& res) {
               std::vector<const BackendPool*> pools;
               for (BackendPool* p : ctx.pools()) pools.push_back(p);
               res.set_content(ctx.metrics.render(pools),
                               "text/plain; version=0.0.4; charset=utf-8");
             }));
}

RouterServer::RouterServer(RouterOptions options) {
  // A client that hangs up makes the next write raise SIGPIPE, which would end the process;
  // the failed write is how the router notices and closes the backend's stream.
  std::signal(SIGPIPE, SIG_IGN);
  impl_ = std::make_unique<Impl>(std::move(options));
}

RouterServer::~RouterServer() { stop(); }

int RouterServer::bind() {
  const auto& o = impl_->ctx.options;
  impl_->port = impl_->http.bind(o.host, o.port);
  return impl_->port;
}

void RouterServer::serve() {
  impl_->http.serve(
      [this] { impl_->health_thread = std::thread([this] { impl_->health_loop(); }); });
}

void RouterServer::stop() {
  if (!impl_) return;
  std::call_once(impl_->stopped, [this] {
    impl_->http.stop();
    // Relays still under way are given up: their calls and connections go with the loop.
    impl_->backend_work.reset();
    impl_->backend_loop.stop();
    if (impl_->backend_thread.joinable()) impl_->backend_thread.join();
    {
      std::lock_guard lock(impl_->health_mutex);
      impl_->health_stop = true;
    }
    impl_->health_cv.notify_all();
    if (impl_->health_thread.joinable()) impl_->health_thread.join();
  });
}

int RouterServer::port() const { return impl_->port; }

}  // namespace tern::router
