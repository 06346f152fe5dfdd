// The queue through which the engine thread hands one HTTP request its engine outputs. Unbounded
// on purpose: the engine thread only ever appends and never waits for a reader, so a slow or
// vanished client cannot stall generation for everyone else. After each push the channel's
// listener runs on the engine thread: it only schedules the reader (on the HTTP event loop).
#pragma once

#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "tern/engine/request_output.h"

namespace tern::server {

struct EngineEvent {
  enum class Kind {
    Accepted,  // every prompt of the submission was queued
    Rejected,  // none was queued; `status` and `error` say why
    Output,    // news for the prompt `prompt_index`
    Failed,    // the engine failed; the request is over
  };
  Kind kind = Kind::Output;
  int prompt_index = 0;
  RequestOutput output;
  std::string error;
  int status = 400;  // of a Rejected: 400 (the request), 503 (the server is full or stopping)
};

class RequestChannel {
 public:
  explicit RequestChannel(std::function<void()> listener = {}) : listener_(std::move(listener)) {}

  void push(EngineEvent event) {
    std::function<void()> listener;
    {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(event));
      listener = listener_;
    }
    if (listener) listener();
  }

  // Moves every queued event into `out` (cleared first); never waits.
  void take_all(std::vector<EngineEvent>& out) {
    out.clear();
    std::lock_guard lock(mutex_);
    while (!events_.empty()) {
      out.push_back(std::move(events_.front()));
      events_.pop_front();
    }
  }

  // No more listening (the reader is done): lets go of what the listener holds.
  void detach() {
    std::function<void()> dropped;
    std::lock_guard lock(mutex_);
    dropped.swap(listener_);
  }

 private:
  std::mutex mutex_;
  std::deque<EngineEvent> events_;
  std::function<void()> listener_;
};

}  // namespace tern::server
