// The queue through which the engine thread hands one HTTP request its engine outputs. Unbounded
// on purpose: the engine thread only ever appends and never waits for a reader, so a slow or
// vanished client cannot stall generation for everyone else.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "tern/engine/request_output.h"

namespace tern::server {

struct EngineEvent {
  enum class Kind {
    Accepted,  // every prompt of the submission was queued
    Rejected,  // none was queued; `error` says why (a client error)
    Output,    // news for the prompt `prompt_index`
    Failed,    // the engine failed; the request is over
  };
  Kind kind = Kind::Output;
  int prompt_index = 0;
  RequestOutput output;
  std::string error;
};

class RequestChannel {
 public:
  void push(EngineEvent event) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(event));
    }
    ready_.notify_one();
  }

  // Moves every queued event into `out` (cleared first), waiting up to `timeout` for the first.
  // False when nothing came.
  bool pop_all(std::vector<EngineEvent>& out, std::chrono::milliseconds timeout) {
    out.clear();
    std::unique_lock lock(mutex_);
    if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
    while (!events_.empty()) {
      out.push_back(std::move(events_.front()));
      events_.pop_front();
    }
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<EngineEvent> events_;
};

}  // namespace tern::server
