// vLLM's ZmqEventPublisher for tern: the engine thread hands over each step's KV cache events,
// a thread of its own sends them, so the step never waits on the network.
//
// Every batch is one 3-frame message on a PUB socket: [topic, sequence number (8 bytes, big
// endian, from 0), msgpack payload (kv_event_encoding.h)]. A subscriber that sees a gap in the
// numbers (it joined late, or fell behind the high-water mark) asks the ROUTER socket at
// replay_endpoint for what it missed: a request [empty, start sequence (8 bytes)] is answered
// with [empty, topic, sequence, payload] for each batch kept from there on, then
// [empty, empty, -1 (8 bytes), empty].
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tern/kv_events/kv_event_encoding.h"
#include "tern/kv_events/kv_events_config.h"

namespace tern::kv_events {

// The start sequence of a replay request as the ROUTER socket receives it: [identity, empty,
// 8 bytes big endian]; nullopt for anything else.
std::optional<uint64_t> parse_replay_request(const std::vector<std::string>& frames);

class ZmqEventPublisher {
 public:
  // Binds or connects the sockets (tern::Error naming the endpoint when ZMQ cannot) and starts
  // the sending thread.
  explicit ZmqEventPublisher(const KvEventsConfig& config);
  // Sends what is queued (waiting at most a second for slow peers), then stops.
  ~ZmqEventPublisher();
  ZmqEventPublisher(const ZmqEventPublisher&) = delete;
  ZmqEventPublisher& operator=(const ZmqEventPublisher&) = delete;

  // Queues a batch; never blocks. With max_queue_size batches already waiting, the batch is
  // dropped and counted (a subscriber sees the gap and asks for a replay of what was kept).
  void publish(KvEventBatch batch);

  // Batches sent, and dropped because the queue was full.
  int64_t num_published() const;
  int64_t num_dropped() const;

 private:
  void run();
  void send(const std::string& payload);
  void answer_replays();

  KvEventsConfig config_;
  void* context_ = nullptr;
  void* pub_ = nullptr;
  void* replay_ = nullptr;  // null without replay_endpoint

  mutable std::mutex mutex_;  // guards the fields below it
  std::condition_variable wake_;
  std::deque<KvEventBatch> queue_;
  bool stopping_ = false;
  int64_t published_ = 0, dropped_ = 0;

  uint64_t next_seq_ = 0;                              // sending thread only
  std::deque<std::pair<uint64_t, std::string>> kept_;  // the last buffer_steps, for replay
  std::thread thread_;
};

}  // namespace tern::kv_events
