// `tern router`: the OpenAI-compatible front of tern serve instances, prefill/decode pools
// (--prefill, --decode) or plain replicas (--backend). SIGTERM / SIGINT stop it: no new
// connections, streams in flight closed (their backends abort them), exit 0.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commands/commands.h"
#include "tern/core/error.h"
#include "tern/router/router_server.h"

namespace tern::cli {
namespace {

std::string joined(const std::vector<std::string>& urls) {
  std::string s;
  for (const std::string& u : urls) s += (s.empty() ? "" : " ") + u;
  return s;
}

void run(const router::RouterOptions& options) {
  // Every thread inherits this mask, so the signals go only to the waiter below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  router::RouterServer server(options);
  const int port = server.bind();
  if (options.backend_urls.empty())
    std::fprintf(stderr, "tern router: prefill %s, decode %s\n",
                 joined(options.prefill_urls).c_str(), joined(options.decode_urls).c_str());
  else
    std::fprintf(stderr, "tern router: replicas %s\n", joined(options.backend_urls).c_str());
  std::fprintf(stderr, "tern router: listening on http://%s:%d (policy %s)\n", options.host.c_str(),
               port, options.policy.c_str());

  std::thread waiter([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    std::fprintf(stderr, "tern router: %s, shutting down\n",
                 signal == SIGINT ? "SIGINT" : "SIGTERM");
    server.stop();
  });
  server.serve();
  server.stop();
  // serve() returns only once stop() ran, which only the waiter calls: it has returned too.
  waiter.join();
  std::fprintf(stderr, "tern router: stopped\n");
}

}  // namespace

void add_router_command(CLI::App& app) {
  auto opt = std::make_shared<router::RouterOptions>();
  CLI::App* cmd = app.add_subcommand(
      "router",
      "OpenAI-compatible router: prefill/decode disaggregation or data-parallel replicas");
  cmd->add_option("--prefill", opt->prefill_urls,
                  "Prefill instances (tern serve --role prefill), http://HOST:PORT ...");
  cmd->add_option("--decode", opt->decode_urls,
                  "Decode instances (tern serve --role decode), http://HOST:PORT ...");
  cmd->add_option("--backend", opt->backend_urls,
                  "Plain replicas (data parallel) instead of prefill/decode pools");
  cmd->add_option("--disagg-min-prompt-tokens", opt->disagg_min_prompt_tokens,
                  "Prefill/decode mode: a prompt of fewer tokens (counted by a decode instance's "
                  "/tokenize) goes straight to a decode instance, which prefills it itself; 0: "
                  "every request is prefilled by a prefill instance")
      ->capture_default_str();
  cmd->add_option("--host", opt->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", opt->port, "Port to listen on (0: any free port)")
      ->capture_default_str();
  cmd->add_option("--policy", opt->policy,
                  "How a pool's backend is picked: round_robin, least_outstanding, prefix_aware")
      ->capture_default_str();
  cmd->add_option("--health-check-interval", opt->health_check_interval,
                  "Seconds between two GET /health of each backend")
      ->capture_default_str();
  cmd->add_option("--request-timeout", opt->request_timeout,
                  "Seconds a backend may stay silent before its request fails")
      ->capture_default_str();
  cmd->add_option("--http-threads", opt->http_threads,
                  "Threads that parse request bodies (relays, idle connections and probes "
                  "hold none)")
      ->capture_default_str();
  const std::vector<CLI::Option*> prefix_aware = {
      cmd->add_option("--prefix-chunk-chars", opt->prefix_aware.chunk_chars,
                      "prefix_aware: prompt bytes per hashed chunk")
          ->capture_default_str(),
      cmd->add_option(
             "--cache-threshold", opt->prefix_aware.cache_threshold,
             "prefix_aware: the fraction of the prompt a backend's known prefix must cover")
          ->capture_default_str(),
      cmd->add_option(
             "--balance-abs-threshold", opt->prefix_aware.balance_abs_threshold,
             "prefix_aware: least loaded instead when max - min in flight exceeds this ...")
          ->capture_default_str(),
      cmd->add_option("--balance-rel-threshold", opt->prefix_aware.balance_rel_threshold,
                      "... and max exceeds this times min")
          ->capture_default_str()};
  cmd->callback([opt, prefix_aware] {
    // Another policy would never read them: an error, not a setting silently dropped.
    for (const CLI::Option* o : prefix_aware)
      if (o->count() > 0 && opt->policy != "prefix_aware")
        throw Error(o->get_name() + " applies to --policy prefix_aware (the policy is " +
                    opt->policy + ")");
    run(*opt);
  });
}

}  // namespace tern::cli
