// `tern serve`: an OpenAI-compatible HTTP server (http/event_server.h) in front of the engine, with
// vLLM's routes: /v1/completions, /v1/chat/completions, /v1/models, /health, /version,
// /tokenize, /detokenize and /metrics.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tern/engine/llm.h"
#include "tern/http/event_server.h"
#include "tern/kv_events/kv_events_config.h"
#include "tern/server/server_metrics.h"

namespace tern::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (see OpenAIServer::port)
  std::string served_model_name;
  std::string model_path;  // shown as the model's root in /v1/models
  std::string api_key;     // empty: no authentication
  size_t max_request_body = size_t{16} << 20;
  // Threads that parse requests and render prompts; connections and streams hold none.
  int http_threads = 4;
  // Connections open at once; past it a new one gets a 503 and is closed.
  int max_connections = 4096;
  // Requests that wait for the engine to take them up (SGLang's --max-queued-requests); past
  // it a new one gets a 503 with Retry-After. 0: no bound, as vLLM.
  int64_t max_waiting_requests = 0;
  // The HTTP deadlines: a request's header after its first byte, its body after its header, an
  // idle connection, a client that takes no bytes of its answer.
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};
  std::chrono::milliseconds keep_alive_timeout{5'000};
  std::chrono::milliseconds write_timeout{30'000};
  std::string chat_template;  // a template source overriding the model's (empty: the model's)
  // Seconds between the engine's log lines of throughput, cache and speculative-decoding
  // stats (<= 0: none; `tern serve --disable-log-stats`).
  double log_stats_interval = 0.0;
  // The nice value of the engine thread and its OpenMP team (0-19, compute_priority.h): a
  // prefill instance sharing cores with a decode instance yields them to its steps.
  int compute_nice = 0;
  // vLLM's --tool-call-parser (hermes, llama3_json; empty: none), --enable-auto-tool-choice
  // and --reasoning-parser (qwen3, deepseek_r1; empty: none). Unknown names throw tern::Error.
  std::string tool_call_parser;
  bool enable_auto_tool_choice = false;
  std::string reasoning_parser;
  // vLLM's metric names, tern's or both on /metrics (serve --metrics-compat).
  MetricNames metric_names = MetricNames::Both;
  // vLLM's --kv-events-config: the prefix cache's events published over ZMQ (kv_events/).
  kv_events::KvEventsConfig kv_events;
};

class OpenAIServer {
 public:
  // `llm` must outlive the server; its engine is driven by the server's engine thread from now
  // on. Throws tern::Error when the --chat-template override does not parse.
  OpenAIServer(LLM& llm, ServerOptions options);
  ~OpenAIServer();
  OpenAIServer(const OpenAIServer&) = delete;
  OpenAIServer& operator=(const OpenAIServer&) = delete;

  // Binds the listening socket; returns the port. Throws tern::Error when it cannot.
  int bind();
  // Serves on a socket bound before the model loaded (http::listen_on); returns its port.
  int adopt(http::ListeningSocket socket);
  // Serves on the bound socket until stop(); returns then.
  void serve();
  // Stops accepting, aborts requests in flight (streams end, waiting handlers get their
  // aborted outputs) and stops the engine thread. Safe from any thread, more than once.
  void stop();

  int port() const;
  // Requests the engine has not finished (tests wait for 0).
  int64_t num_unfinished_requests() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::server
