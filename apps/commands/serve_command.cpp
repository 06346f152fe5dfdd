// `tern serve MODEL`: the OpenAI-compatible HTTP server. SIGTERM / SIGINT drain it: stop
// accepting, abort the requests in flight (their streams end with finish_reason "abort"), exit 0.
#include <omp.h>
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "commands/commands.h"
#include "commands/engine_options.h"
#include "commands/habit_flags.h"
#include "commands/model_options.h"
#include "tern/core/error.h"
#include "tern/engine/llm.h"
#include "tern/kv_events/kv_events_config.h"
#include "tern/server/compute_priority.h"
#include "tern/server/openai_server.h"

namespace tern::cli {
namespace {

struct ServeOptions {
  ModelOptions model;
  EngineOptions engine;
  ModelArgument model_argument;
  server::ServerOptions server;
  std::string chat_template_path;
  bool disable_log_stats = false;
  std::string kv_transfer_config;  // vLLM's --kv-transfer-config JSON
  std::string kv_events_config;    // vLLM's --kv-events-config JSON
  std::string role;                // --role prefill | decode | both
  double kv_lease_seconds = 30.0;
  bool kv_lease_given = false;  // --kv-lease-seconds was on the command line
};

// --kv-transfer-config, or --role with its defaults (loopback, vLLM's port 14579); the lease.
disagg::KvTransferConfig kv_transfer_config(const ServeOptions& opt) {
  disagg::KvTransferConfig c;
  if (!opt.kv_transfer_config.empty()) c = disagg::parse_kv_transfer_config(opt.kv_transfer_config);
  if (!opt.role.empty()) {
    const disagg::KvRole role = disagg::parse_kv_role(opt.role);
    if (!opt.kv_transfer_config.empty() && role != c.role)
      throw Error(std::string("--role ") + opt.role + " contradicts kv_role " +
                  disagg::kv_role_name(c.role) + " of --kv-transfer-config");
    c.role = role;
  }
  if (opt.kv_lease_given && !c.produces())
    throw Error(
        "--kv-lease-seconds applies to an instance that prefills for others (--role "
        "prefill or both)");
  c.lease_seconds = opt.kv_lease_seconds;
  return c;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void run(ServeOptions opt) {
  const auto start = std::chrono::steady_clock::now();
  // Every thread (OpenMP's and the HTTP server's too) inherits this mask, so the signals go only to
  // the thread that waits for them below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  opt.model.model = opt.model_argument.get("tern serve MODEL");
  if (opt.server.served_model_name.empty()) opt.server.served_model_name = opt.model.model;
  opt.server.model_path = opt.model.model;
  if (opt.server.api_key.empty())
    if (const char* key = std::getenv("TERN_API_KEY")) opt.server.api_key = key;
  if (!opt.chat_template_path.empty()) opt.server.chat_template = read_file(opt.chat_template_path);
  if (opt.server.max_request_body == 0) throw Error("--max-request-body must be at least 1 byte");
  server::check_compute_nice(opt.server.compute_nice);
  opt.server.log_stats_interval = opt.disable_log_stats ? 0.0 : 10.0;  // vLLM's interval
  if (!opt.kv_events_config.empty())
    opt.server.kv_events = kv_events::parse_kv_events_config(opt.kv_events_config);

  EngineConfig config = opt.engine.engine_config();
  config.kv_transfer = kv_transfer_config(opt);
  config.announce = [](const std::string& step) { std::fprintf(stderr, "%s\n", step.c_str()); };
  // The port first: one in use fails now, not after the model has loaded.
  http::ListeningSocket socket = http::listen_on(opt.server.host, opt.server.port);
  const LoadOptions load = opt.model.load_options();
  LoadedModel model = load_model_announced(load);
  if (!model.tokenizer)
    throw Error(opt.model.model + ": no tokenizer found; give one with --tokenizer");
  std::optional<LoadedModel> draft = load_draft(config.speculative, load);
  const std::string description =
      model.description + (draft ? ", draft: " + draft->description : std::string());
  LLM llm(std::move(model), config, std::move(draft));
  server::OpenAIServer server(llm, opt.server);
  const int port = server.adopt(std::move(socket));
  std::fprintf(stderr, "model: %s, %d threads\n", description.c_str(), omp_get_max_threads());
  if (config.speculative.enabled())
    std::fprintf(stderr, "speculative decoding: %s\n", config.speculative.describe().c_str());
  warn_about_draft(llm.engine());
  if (const disagg::KvConnector* kv = llm.engine().kv_connector()) {
    const std::string serves =
        kv->port() ? ", pulls served on " + kv->config().ip + ":" + std::to_string(kv->port())
                   : std::string();
    std::fprintf(stderr, "kv transfer: %s, engine %s, model fingerprint %s%s\n",
                 disagg::kv_role_name(kv->config().role), kv->engine_id().c_str(),
                 kv->fingerprint().c_str(), serves.c_str());
  }
  if (const kv_events::KvEventsConfig& e = opt.server.kv_events; e.enabled)
    std::fprintf(stderr, "kv events: published on %s, topic \"%s\"%s\n", e.endpoint.c_str(),
                 e.topic.c_str(),
                 e.replay_endpoint.empty() ? "" : (", replay on " + e.replay_endpoint).c_str());
  // Every thread of a serving process exists before it says it listens.
  std::thread waiter([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    std::fprintf(stderr, "tern serve: %s, shutting down\n",
                 signal == SIGINT ? "SIGINT" : "SIGTERM");
    server.stop();
  });
  std::fprintf(stderr,
               "tern serve: listening on http://%s:%d (model \"%s\", max_model_len %lld, ready "
               "in %.1f s)\n",
               opt.server.host.c_str(), port, opt.server.served_model_name.c_str(),
               static_cast<long long>(llm.engine().max_model_len()),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

  server.serve();
  server.stop();
  waiter.join();
  std::fprintf(stderr, "tern serve: stopped\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto opt = std::make_shared<ServeOptions>();
  CLI::App* cmd =
      app.add_subcommand("serve", "OpenAI-compatible HTTP server (vLLM's routes and metrics)");
  opt->model_argument.add_to(cmd,
                             "GGUF file, Hugging Face folder, or (dummy) config.json / folder");
  cmd->add_option("--host", opt->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", opt->server.port, "Port to listen on (0: any free port)")
      ->capture_default_str();
  cmd->add_option("--served-model-name", opt->server.served_model_name,
                  "The model name clients use (default: the model argument)");
  cmd->add_option("--api-key", opt->server.api_key,
                  "Require 'Authorization: Bearer KEY' on /v1 routes (or env TERN_API_KEY)");
  cmd->add_option("--max-request-body", opt->server.max_request_body,
                  "Largest request body in bytes (larger: 413)")
      ->capture_default_str();
  cmd->add_option("--http-threads", opt->server.http_threads,
                  "Threads that parse requests and render prompts (connections and streams "
                  "hold none)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--max-connections", opt->server.max_connections,
                  "Connections open at once; past it a new one gets 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-waiting-requests,--max-queued-requests", opt->server.max_waiting_requests,
                  "Requests waiting for the engine; past it a new one gets 503 with Retry-After "
                  "(0: no bound)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--chat-template", opt->chat_template_path,
                  "Jinja chat template file instead of the model's");
  cmd->add_option("--tool-call-parser", opt->server.tool_call_parser,
                  "Reads tool calls in chat output: hermes (Qwen2.5/Qwen3), llama3_json or "
                  "openai (gpt-oss; implies --reasoning-parser openai_gptoss)");
  cmd->add_flag("--enable-auto-tool-choice", opt->server.enable_auto_tool_choice,
                "Accept tool_choice \"auto\" (the default with tools); needs --tool-call-parser");
  cmd->add_option("--reasoning-parser", opt->server.reasoning_parser,
                  "Splits <think>...</think> (gpt-oss: the analysis channel) into "
                  "reasoning_content: qwen3, deepseek_r1 or openai_gptoss");
  cmd->add_option_function<std::string>(
         "--metrics-compat",
         [opt](const std::string& names) {
           const std::optional<server::MetricNames> parsed = server::parse_metric_names(names);
           if (!parsed)
             throw CLI::ValidationError("--metrics-compat",
                                        "'" + names + "' is not one of both, vllm, tern");
           opt->server.metric_names = *parsed;
         },
         "Names on /metrics: vllm (vLLM's, for the endpoint picker, llm-d, KEDA), tern, or "
         "both (default); what only tern measures is tern: always")
      ->type_name("both|vllm|tern");
  cmd->add_flag("--disable-log-stats", opt->disable_log_stats,
                "No log line every 10 s of throughput, KV cache and speculative decoding");
  cmd->add_option("--kv-transfer-config", opt->kv_transfer_config,
                  "Prefill/decode disaggregation, vLLM's JSON: {\"kv_connector\":\"UcxConnector\","
                  "\"kv_role\":\"kv_producer|kv_consumer|kv_both\",\"kv_ip\":\"127.0.0.1\","
                  "\"kv_port\":14579}");
  cmd->add_option(
      "--kv-events-config", opt->kv_events_config,
      "Publish the prefix cache's events for llm-d's routers, vLLM's JSON: "
      "{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\",\"endpoint\":"
      "\"tcp://*:5557\",\"topic\":\"kv@POD_IP@MODEL\",\"replay_endpoint\":\"tcp://*:5558\"}");
  cmd->add_option("--role", opt->role,
                  "prefill | decode | both: --kv-transfer-config's kv_role, transfer side on "
                  "127.0.0.1:14579");
  CLI::Option* lease =
      cmd->add_option("--kv-lease-seconds", opt->kv_lease_seconds,
                      "How long a prefilled prompt's blocks wait for a decode instance's pull")
          ->capture_default_str();
  cmd->add_option("--compute-nice", opt->server.compute_nice,
                  "Nice value (0-19) of the engine's compute threads only: a prefill instance "
                  "sharing cores with a decode instance leaves them to its steps")
      ->capture_default_str();
  opt->model.add_to(cmd);
  opt->engine.max_step_ms = "auto";  // a server's streams decode beside arriving prompts
  cmd->add_option("--seed", opt->engine.config.seed,
                  "Seed of the requests that bring none (vLLM's --seed): their samples repeat "
                  "from one run to the next")
      ->capture_default_str();
  add_serve_habit_flags(cmd);
  opt->engine.add_to(cmd);
  cmd->callback([opt, lease] {
    opt->kv_lease_given = lease->count() > 0;
    run(*opt);
  });
}

}  // namespace tern::cli
