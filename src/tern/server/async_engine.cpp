#include "tern/server/async_engine.h"

#include <omp.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <optional>
#include <vector>

#include "tern/kernels/cpu/thread_team.h"
#include "tern/server/compute_priority.h"

namespace tern::server {

AsyncEngine::AsyncEngine(LLMEngine& engine, ServerMetrics& metrics, double log_stats_interval,
                         int compute_nice, kv_events::ZmqEventPublisher* kv_events,
                         int64_t max_waiting_requests)
    : engine_(engine),
      metrics_(metrics),
      kv_events_(kv_events),
      max_waiting_requests_(max_waiting_requests),
      stats_(engine.stats()),
      stats_logger_(log_stats_interval) {
  // From now on the kernels run on the engine thread, which gets a team of its own. The thread
  // that loaded the model holds one too (and libgomp's pool, for the loading passes): give both
  // back, so that the process does not keep more workers than cores. (With two libgomp pools,
  // libgomp let its workers spin only briefly and every region of a step woke them: a
  // 1B-parameter decode made 34,000 context switches for 256 tokens instead of 142.)
  cpu::release_thread_team();
  omp_pause_resource_all(omp_pause_soft);
  engine_.record_kv_events(kv_events_ != nullptr);
  engine_.set_transfer_wakeup([this] {
    std::lock_guard lock(mutex_);
    transfer_event_ = true;
    wake_.notify_one();
  });
  std::promise<void> started;
  // A thread libgomp did not make starts from the process's initial settings, not from what
  // omp_set_num_threads (--threads) set on this one: without this, `tern serve --threads 1`
  // computed on every core, and two instances beside each other spun on the same cores.
  const int threads = omp_get_max_threads();
  thread_ = std::thread([this, compute_nice, threads, &started] {
    omp_set_num_threads(threads);
    try {
      if (compute_nice != 0) set_compute_nice(compute_nice);
    } catch (...) {
      started.set_exception(std::current_exception());
      return;
    }
    started.set_value();
    loop();
  });
  try {
    started.get_future().get();
  } catch (...) {
    thread_.join();
    engine_.set_transfer_wakeup(nullptr);
    throw;
  }
}

AsyncEngine::~AsyncEngine() { shutdown(); }

void AsyncEngine::submit(std::vector<EngineRequest> requests,
                         std::shared_ptr<RequestChannel> channel) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      submissions_.push_back({std::move(requests), std::move(channel)});
      wake_.notify_one();
      return;
    }
  }
  EngineEvent rejected;
  rejected.kind = EngineEvent::Kind::Rejected;
  rejected.error = "the server is shutting down";
  channel->push(std::move(rejected));
}

void AsyncEngine::abort(std::vector<std::string> request_ids) {
  std::lock_guard lock(mutex_);
  for (std::string& id : request_ids) aborts_.push_back(std::move(id));
  wake_.notify_one();
}

void AsyncEngine::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  engine_.set_transfer_wakeup(nullptr);
}

bool AsyncEngine::reset_prefix_cache() {
  std::future<bool> done;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    done = prefix_cache_resets_.emplace_back().get_future();
    wake_.notify_one();
  }
  return done.get();
}

EngineStats AsyncEngine::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

int64_t AsyncEngine::num_unfinished() const {
  std::lock_guard lock(mutex_);
  return num_unfinished_;
}

void AsyncEngine::add(Submission& submission) {
  const auto waiting = static_cast<int64_t>(engine_.stats().num_waiting);
  if (max_waiting_requests_ > 0 &&
      waiting + static_cast<int64_t>(submission.requests.size()) > max_waiting_requests_) {
    // Overload: a clear answer the client (or its load balancer) can retry elsewhere, instead
    // of a wait without bound.
    metrics_.count_rejected_queue_full();
    EngineEvent rejected;
    rejected.kind = EngineEvent::Kind::Rejected;
    rejected.status = 503;
    rejected.error = "the server is overloaded: " + std::to_string(waiting) +
                     " requests wait for the engine (--max-waiting-requests " +
                     std::to_string(max_waiting_requests_) + "); retry later";
    submission.channel->push(std::move(rejected));
    return;
  }
  std::vector<std::string> added;
  try {
    for (EngineRequest& r : submission.requests) {
      engine_.add_request(r.id, std::move(r.prompt_token_ids), r.params, r.kv);
      added.push_back(r.id);
    }
  } catch (const std::exception& e) {
    // All or nothing: a request with several prompts is answered with one error.
    for (const std::string& id : added) engine_.abort_request(id);
    EngineEvent rejected;
    rejected.kind = EngineEvent::Kind::Rejected;
    rejected.error = e.what();
    submission.channel->push(std::move(rejected));
    // The aborted ones are reported by the next step(); they have no route, so nobody hears.
    return;
  }
  for (size_t i = 0; i < submission.requests.size(); ++i)
    routes_[submission.requests[i].id] = Route{submission.channel, static_cast<int>(i), -1.0, {}};
  EngineEvent accepted;
  accepted.kind = EngineEvent::Kind::Accepted;
  submission.channel->push(std::move(accepted));
}

void AsyncEngine::route(RequestOutput& output) {
  const auto it = routes_.find(output.request_id);
  if (it == routes_.end()) return;  // rejected with its batch, see add()
  Route& r = it->second;
  bool new_tokens = false;
  for (const CompletionOutput& c : output.outputs) {
    new_tokens = new_tokens || !c.new_token_ids.empty();
    if (c.index == 0 && c.finish_reason) r.finished_reason = *c.finish_reason;
  }
  if (new_tokens && output.metrics.last_token_time >= 0) {
    if (r.last_token_time >= 0)
      metrics_.observe_inter_token_latency(output.metrics.last_token_time - r.last_token_time);
    r.last_token_time = output.metrics.last_token_time;
  }
  const bool finished = output.finished;
  if (finished)
    metrics_.observe_finished(output.metrics,
                              r.finished_reason.empty() ? "abort" : r.finished_reason);
  if (output.error) {  // e.g. its KV could not be pulled: an error response, not an end
    EngineEvent failed;
    failed.kind = EngineEvent::Kind::Failed;
    failed.prompt_index = r.prompt_index;
    failed.error = *output.error;
    r.channel->push(std::move(failed));
    routes_.erase(it);
    return;
  }
  EngineEvent event;
  event.kind = EngineEvent::Kind::Output;
  event.prompt_index = r.prompt_index;
  event.output = std::move(output);
  r.channel->push(std::move(event));
  if (finished) routes_.erase(it);
}

void AsyncEngine::fail_all(const std::string& message) {
  for (auto& [id, r] : routes_) {
    engine_.abort_request(id);
    EngineEvent failed;
    failed.kind = EngineEvent::Kind::Failed;
    failed.prompt_index = r.prompt_index;
    failed.error = message;
    r.channel->push(std::move(failed));
  }
  routes_.clear();
}

void AsyncEngine::publish_kv_events() {
  if (!kv_events_) return;
  std::vector<kv_events::KvCacheEvent> events = engine_.take_kv_events();
  if (events.empty()) return;
  const double unix_now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  kv_events_->publish({unix_now, std::move(events), 0});
}

void AsyncEngine::loop() {
  std::vector<Submission> submissions;
  std::vector<std::string> aborts;
  std::vector<std::promise<bool>> resets;
  bool stopping = false;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      // Requests that only wait on their KV pulls, or held leases, leave the engine idle until
      // the connector wakes it (or the next lease expires).
      const auto ready = [&] {
        return stopping_ || !submissions_.empty() || !aborts_.empty() || transfer_event_ ||
               !prefix_cache_resets_.empty() || engine_.has_work_to_step();
      };
      if (const std::optional<double> deadline = engine_.next_transfer_deadline()) {
        const auto until = std::chrono::steady_clock::time_point(
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(*deadline)));
        wake_.wait_until(lock, until, ready);
      } else {
        wake_.wait(lock, ready);
      }
      transfer_event_ = false;
      submissions.swap(submissions_);
      aborts.swap(aborts_);
      resets.swap(prefix_cache_resets_);
      stopping = stopping_;
    }
    // Between steps, before the new submissions can take blocks.
    for (std::promise<bool>& reset : resets) reset.set_value(engine_.reset_prefix_cache());
    resets.clear();
    publish_kv_events();
    for (Submission& s : submissions) add(s);
    submissions.clear();
    // An aborted request leaves the engine at once; the next step() reports it.
    bool reports_pending = false;
    for (const std::string& id : aborts) reports_pending |= engine_.abort_request(id);
    aborts.clear();
    if (stopping)
      for (const auto& [id, r] : routes_) reports_pending |= engine_.abort_request(id);

    if (engine_.has_unfinished_requests() || reports_pending || engine_.has_pending_transfers()) {
      try {
        std::vector<RequestOutput> outputs = engine_.step();
        // The stats first: a client that has its last chunk and then scrapes /metrics must
        // find the step that produced it counted.
        const EngineStats stats = engine_.stats();
        publish_kv_events();
        {
          std::lock_guard lock(mutex_);
          stats_ = stats;
        }
        for (RequestOutput& output : outputs) route(output);
        stats_logger_.observe(stats, LLMEngine::now());
      } catch (const std::exception& e) {
        // A bug or an exhausted resource: fail the requests in flight, keep serving.
        std::fprintf(stderr, "tern serve: engine step failed: %s\n", e.what());
        fail_all(std::string("the engine failed: ") + e.what());
        while (engine_.has_unfinished_requests()) {
          try {
            engine_.step();
          } catch (const std::exception&) {
            break;
          }
        }
      }
    }
    {
      std::lock_guard lock(mutex_);
      stats_ = engine_.stats();
      num_unfinished_ = static_cast<int64_t>(routes_.size());
    }
    if (stopping && !engine_.has_unfinished_requests()) return;
  }
}

}  // namespace tern::server
