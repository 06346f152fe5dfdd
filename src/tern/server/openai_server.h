// `tern serve`: an OpenAI-compatible HTTP server (cpp-httplib) in front of the engine, with
// vLLM's routes: /v1/completions, /v1/chat/completions, /v1/models, /health, /version,
// /tokenize, /detokenize and /metrics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tern/engine/llm.h"
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
  // Connections served at once; each streaming request holds one thread while it streams.
  int http_threads = 128;
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
