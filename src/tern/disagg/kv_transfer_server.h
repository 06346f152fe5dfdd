// Producer side of the KV transfer: listens on host:port, checks each pull's fingerprint, asks
// the PullHandler for the blocks and sends them straight from the KV cache's memory as UCX
// active messages (one message per block, its scattered ranges as one IOV).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tern/disagg/kv_pull.h"

namespace tern::disagg {

struct KvTransferServerConfig {
  std::string host = "127.0.0.1";  // binds to loopback unless told otherwise
  int port = 0;                    // 0: any free port (port() says which)
  std::string fingerprint;         // model + KV layout; a client with another one is refused
  // A pull whose data are not all sent by then fails (on_done(false), connection closed): a
  // consumer that stopped reading without its connection failing cannot hold blocks forever.
  double pull_timeout_seconds = 60;
};

// Owns its UCX context/worker/listener and a thread that progresses them; the handler and
// every on_done run on that thread.
class KvTransferServer {
 public:
  KvTransferServer(KvTransferServerConfig config,
                   PullHandler handler);  // throws tern::Error when it cannot listen
  ~KvTransferServer();  // stops the thread, closes endpoints (pending on_done(false) run first)
  KvTransferServer(const KvTransferServer&) = delete;
  KvTransferServer& operator=(const KvTransferServer&) = delete;

  int port() const;
  struct Stats {
    uint64_t bytes_sent = 0;  // block bytes whose send completed
    uint64_t blocks_sent = 0;
    uint64_t pulls_served = 0;   // granted and fully sent
    uint64_t pulls_refused = 0;  // fingerprint mismatch, handler error, ungrantable request
    uint64_t bad_frames = 0;     // malformed or oversized requests (that endpoint was closed)
  };
  Stats stats() const;  // thread-safe

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::disagg
