// `tern router`: an OpenAI-compatible front for tern serve instances that needs no change in
// clients. With --prefill and --decode pools it runs vLLM's disaggregated two-step flow (prefill
// with max_tokens 1 and do_remote_decode, then decode with the returned kv_transfer_params,
// whose answer is streamed through); with --backend it spreads requests over plain replicas.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tern/router/routing_policy.h"

namespace tern::router {

struct RouterOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                                     // 0: any free port (see RouterServer::port)
  std::vector<std::string> prefill_urls, decode_urls;  // prefill/decode mode
  std::vector<std::string> backend_urls;               // replica mode
  // Prefill/decode mode: a prompt of fewer tokens is prefilled by the decode instance itself, in
  // one step (llm-d's selective disaggregation: moving a short prompt's KV saves its decode
  // streams less than the transfer costs). 0: every request takes the two-step flow.
  size_t disagg_min_prompt_tokens = 0;
  std::string policy = "round_robin";
  PrefixAwareOptions prefix_aware;
  double health_check_interval = 5.0;  // seconds between two rounds of GET /health
  double request_timeout = 600.0;      // the longest a backend may stay silent, in seconds
  double connect_timeout = 5.0;
  size_t max_request_body = size_t{16} << 20;
  int http_threads = 4;  // threads that parse request bodies (relays hold none)
  bool log = true;       // a stderr line when a backend leaves or rejoins its pool
};

class RouterServer {
 public:
  // Throws tern::Error on a bad configuration (no backends, both modes, a bad URL or policy).
  explicit RouterServer(RouterOptions options);
  ~RouterServer();
  RouterServer(const RouterServer&) = delete;
  RouterServer& operator=(const RouterServer&) = delete;

  // Binds the listening socket; returns the port. Throws tern::Error when it cannot.
  int bind();
  // Checks the backends' health and serves until stop(); returns then.
  void serve();
  // Stops accepting and ends the streams in flight. Safe from any thread, more than once.
  void stop();
  int port() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::router
