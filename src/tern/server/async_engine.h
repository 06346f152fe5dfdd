// The async front of the single-threaded LLMEngine: one engine thread owns the engine and loops
// (take queued submissions and aborts → step() → hand each RequestOutput to its request's
// channel; sleep when idle). HTTP handlers submit; the channel's listener tells the HTTP event
// loop when there is news. The engine thread never waits on a handler: channels are unbounded
// and requests whose clients went away are aborted.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tern/engine/llm_engine.h"
#include "tern/kv_events/zmq_event_publisher.h"
#include "tern/server/request_channel.h"
#include "tern/server/server_metrics.h"
#include "tern/server/stats_logger.h"

namespace tern::server {

struct EngineRequest {
  std::string id;  // unique across the server
  std::vector<int32_t> prompt_token_ids;
  SamplingParams params;
  disagg::KvTransferParams kv;
};

class AsyncEngine {
 public:
  // `engine` and `metrics` must outlive this; the engine is only touched by the engine thread
  // from now on. Every `log_stats_interval` seconds of activity it logs the engine's stats
  // (StatsLogger; <= 0: never). The engine thread and its OpenMP team run at nice value
  // `compute_nice` (compute_priority.h; throws tern::Error when it cannot be set). With
  // `kv_events` (outliving this too), every step's KV cache events are handed to it. A
  // submission that would make more than `max_waiting_requests` requests wait (> 0) is
  // rejected with 503.
  AsyncEngine(LLMEngine& engine, ServerMetrics& metrics, double log_stats_interval = 0.0,
              int compute_nice = 0, kv_events::ZmqEventPublisher* kv_events = nullptr,
              int64_t max_waiting_requests = 0);
  ~AsyncEngine();
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Queues the prompts of one HTTP request (prompt_index = position in `requests`). The channel
  // gets Accepted (all queued) or Rejected (none queued, add_request's message) first, then
  // Output events until every request has finished, or Failed. After shutdown(): Rejected.
  void submit(std::vector<EngineRequest> requests, std::shared_ptr<RequestChannel> channel);
  // Stops requests (a client went away); they end with finish_reason "abort".
  void abort(std::vector<std::string> request_ids);
  // Aborts everything in flight (their channels get the abort), rejects new submissions and
  // joins the engine thread. Idempotent.
  void shutdown();

  // Empties the prefix cache between two steps (LLMEngine::reset_prefix_cache): false while
  // requests hold blocks. Waits for the engine thread.
  bool reset_prefix_cache();

  // The engine's counters as of its last step.
  EngineStats stats() const;
  // Requests queued or in flight that have not finished yet (for tests and shutdown).
  int64_t num_unfinished() const;

 private:
  struct Submission {
    std::vector<EngineRequest> requests;
    std::shared_ptr<RequestChannel> channel;
  };
  struct Route {
    std::shared_ptr<RequestChannel> channel;
    int prompt_index = 0;
    double last_token_time = -1.0;
    std::string finished_reason;  // of completion 0, what request_success_total counts
  };

  void loop();
  void add(Submission& submission);
  void route(RequestOutput& output);
  void fail_all(const std::string& message);
  void publish_kv_events();

  LLMEngine& engine_;
  ServerMetrics& metrics_;
  kv_events::ZmqEventPublisher* kv_events_;
  int64_t max_waiting_requests_;

  mutable std::mutex mutex_;  // guards the fields below it
  std::condition_variable wake_;
  std::vector<Submission> submissions_;
  std::vector<std::string> aborts_;
  std::vector<std::promise<bool>> prefix_cache_resets_;
  bool stopping_ = false;
  bool transfer_event_ = false;  // a KV pull finished or a lease ended: step to take it
  EngineStats stats_;
  int64_t num_unfinished_ = 0;

  std::unordered_map<std::string, Route> routes_;  // engine thread only
  StatsLogger stats_logger_;                       // engine thread only
  std::thread thread_;
};

}  // namespace tern::server
