// The publisher's sockets and its sending thread (libzmq's C API; a ZMQ socket is used by one
// thread only, this one, after the constructor).
#include "tern/kv_events/zmq_event_publisher.h"

#include <zmq.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <vector>

#include "tern/core/error.h"

namespace tern::kv_events {
namespace {

std::string be64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return out;
}

void set_int(void* socket, int option, int64_t value, const char* name) {
  const int v = static_cast<int>(value);
  if (zmq_setsockopt(socket, option, &v, sizeof v) != 0)
    throw Error(std::string("kv events: cannot set ZMQ ") + name + ": " + zmq_strerror(errno));
}

// vLLM's rule: an endpoint with a wildcard host, or a local one, is ours to bind; any other
// names a subscriber that binds (a router's single socket for all pods), and is connected to.
bool binds(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0;
}

// A message's frames; empty when there was none waiting.
std::vector<std::string> receive_now(void* socket) {
  std::vector<std::string> frames;
  for (;;) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, socket, frames.empty() ? ZMQ_DONTWAIT : 0) < 0) {
      zmq_msg_close(&msg);
      return {};
    }
    frames.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
    const bool more = zmq_msg_more(&msg);
    zmq_msg_close(&msg);
    if (!more) return frames;
  }
}

void send_frames(void* socket, const std::vector<const std::string*>& frames) {
  for (size_t i = 0; i < frames.size(); ++i)
    zmq_send(socket, frames[i]->data(), frames[i]->size(), i + 1 < frames.size() ? ZMQ_SNDMORE : 0);
}

}  // namespace

std::optional<uint64_t> parse_replay_request(const std::vector<std::string>& frames) {
  // [identity (the ROUTER's), empty delimiter, start sequence]
  if (frames.size() != 3 || !frames[1].empty() || frames[2].size() != 8) return std::nullopt;
  uint64_t seq = 0;
  for (char c : frames[2]) seq = seq << 8 | static_cast<unsigned char>(c);
  return seq;
}

ZmqEventPublisher::ZmqEventPublisher(const KvEventsConfig& config) : config_(config) {
  context_ = zmq_ctx_new();
  if (!context_) throw Error("kv events: cannot create a ZMQ context");
  try {
    pub_ = zmq_socket(context_, ZMQ_PUB);
    set_int(pub_, ZMQ_SNDHWM, config_.hwm, "SNDHWM");
    set_int(pub_, ZMQ_LINGER, 1000, "LINGER");
    const int rc = binds(config_.endpoint) ? zmq_bind(pub_, config_.endpoint.c_str())
                                           : zmq_connect(pub_, config_.endpoint.c_str());
    if (rc != 0)
      throw Error("kv events: cannot " +
                  std::string(binds(config_.endpoint) ? "bind " : "connect to ") +
                  config_.endpoint + ": " + zmq_strerror(errno));
    if (!config_.replay_endpoint.empty()) {
      replay_ = zmq_socket(context_, ZMQ_ROUTER);
      set_int(replay_, ZMQ_SNDHWM, config_.hwm, "SNDHWM");
      set_int(replay_, ZMQ_LINGER, 1000, "LINGER");
      if (zmq_bind(replay_, config_.replay_endpoint.c_str()) != 0)
        throw Error("kv events: cannot bind the replay endpoint " + config_.replay_endpoint + ": " +
                    zmq_strerror(errno));
    }
  } catch (...) {
    if (replay_) zmq_close(replay_);
    if (pub_) zmq_close(pub_);
    zmq_ctx_term(context_);
    throw;
  }
  thread_ = std::thread([this] { run(); });
}

ZmqEventPublisher::~ZmqEventPublisher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    wake_.notify_one();
  }
  thread_.join();
  if (replay_) zmq_close(replay_);
  zmq_close(pub_);
  zmq_ctx_term(context_);  // waits for the sockets' linger
}

void ZmqEventPublisher::publish(KvEventBatch batch) {
  std::lock_guard lock(mutex_);
  if (static_cast<int64_t>(queue_.size()) >= config_.max_queue_size) {
    if (dropped_++ == 0)
      std::fprintf(stderr, "tern serve: KV events queue full (%lld batches): dropping events\n",
                   static_cast<long long>(config_.max_queue_size));
    return;
  }
  queue_.push_back(std::move(batch));
  wake_.notify_one();
}

int64_t ZmqEventPublisher::num_published() const {
  std::lock_guard lock(mutex_);
  return published_;
}

int64_t ZmqEventPublisher::num_dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

void ZmqEventPublisher::run() {
  // With a replay socket the thread also looks for requests every 20 ms.
  const auto replay_poll = std::chrono::milliseconds(20);
  for (;;) {
    std::deque<KvEventBatch> batches;
    bool stopping = false;
    {
      std::unique_lock lock(mutex_);
      const auto ready = [&] { return stopping_ || !queue_.empty(); };
      if (replay_)
        wake_.wait_for(lock, replay_poll, ready);
      else
        wake_.wait(lock, ready);
      batches.swap(queue_);
      stopping = stopping_;
    }
    for (const KvEventBatch& batch : batches) send(encode_kv_event_batch(batch));
    if (replay_) answer_replays();
    if (stopping) return;  // everything queued before the stop has been sent
  }
}

void ZmqEventPublisher::send(const std::string& payload) {
  const uint64_t seq = next_seq_++;
  const std::string seq_bytes = be64(seq);
  send_frames(pub_, {&config_.topic, &seq_bytes, &payload});
  if (replay_) {
    kept_.emplace_back(seq, payload);
    while (static_cast<int64_t>(kept_.size()) > config_.buffer_steps) kept_.pop_front();
  }
  std::lock_guard lock(mutex_);
  ++published_;
}

void ZmqEventPublisher::answer_replays() {
  static const std::string kEmpty;
  static const std::string kEnd = be64(~uint64_t{0});  // -1: nothing more
  for (std::vector<std::string> frames = receive_now(replay_); !frames.empty();
       frames = receive_now(replay_)) {
    const std::optional<uint64_t> start = parse_replay_request(frames);
    if (!start) continue;  // not a replay request: nothing to answer
    const std::string& client = frames[0];
    for (const auto& [seq, payload] : kept_) {
      if (seq < *start) continue;
      const std::string seq_bytes = be64(seq);
      send_frames(replay_, {&client, &kEmpty, &config_.topic, &seq_bytes, &payload});
    }
    send_frames(replay_, {&client, &kEmpty, &kEmpty, &kEnd, &kEmpty});
  }
}

}  // namespace tern::kv_events
