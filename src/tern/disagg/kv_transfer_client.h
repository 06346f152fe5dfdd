// Consumer side of the KV transfer: pulls a lease's blocks from a producer's KvTransferServer
// into the consumer's own KV cache ranges (received in place, no staging copy for large blocks).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tern/disagg/kv_pull.h"

namespace tern::disagg {

// Owns a UCX context/worker and one connection per producer; pull() is blocking, one call at
// a time per object (not thread-safe; use one client per thread).
class KvTransferClient {
 public:
  explicit KvTransferClient(std::string fingerprint);  // throws tern::Error when UCX cannot start
  ~KvTransferClient();
  KvTransferClient(const KvTransferClient&) = delete;
  KvTransferClient& operator=(const KvTransferClient&) = delete;

  // Connects to host:port (reusing a connection to the same peer if it has one, reconnecting if
  // it died), asks for request.block_ids under request.lease_id and writes block i's bytes into
  // dest[i]'s ranges (same count and sizes as the producer's ranges; a size mismatch is an
  // error and nothing is written past the spans). Never throws; on failure the connection is
  // dropped, so no late write lands in dest after pull returns.
  PullResult pull(const std::string& host, int port, const PullRequest& request,
                  std::span<const std::vector<std::span<std::byte>>> dest, double timeout_seconds);

  struct Stats {
    uint64_t bytes_received = 0;
    uint64_t blocks_received = 0;
  };
  Stats stats() const;  // thread-safe

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::disagg
