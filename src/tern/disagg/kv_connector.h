// The engine's side of disaggregation (vLLM's KVConnector, UCX underneath): a prefill instance
// holds finished prompts' blocks under leases and serves pulls of them from its transfer
// server; a decode instance pulls a prompt's blocks into blocks of its own, on a thread of its
// own, while the engine keeps stepping. The engine thread calls everything here except the
// wake-up, which the transfer threads call when there is something to take.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tern/backend/kv_cache.h"
#include "tern/disagg/kv_lease_table.h"
#include "tern/disagg/kv_transfer_config.h"

namespace tern::disagg {

class KvTransferServer;
class KvTransferClient;

struct KvConnectorStats {
  KvLeaseTable::Stats leases;
  uint64_t bytes_sent = 0, blocks_sent = 0;
  uint64_t bytes_received = 0, blocks_received = 0;
  int64_t pulls_ok = 0, pulls_failed = 0;     // this instance's pulls
  int64_t pulls_refused = 0, bad_frames = 0;  // of its transfer server
};

class KvConnector {
 public:
  // How long a pull may take before it fails (the producer stopped answering).
  static constexpr double kPullTimeoutSeconds = 60.0;

  // `cache` is the engine's KV cache (the transfer side reads and writes its blocks) and must
  // outlive this. A producer starts listening on config.ip:config.port now (tern::Error when
  // it cannot). `fingerprint`: model_fingerprint() of the engine's model and cache.
  KvConnector(const KvTransferConfig& config, KvCache& cache, std::string fingerprint);
  ~KvConnector();
  KvConnector(const KvConnector&) = delete;
  KvConnector& operator=(const KvConnector&) = delete;

  const KvTransferConfig& config() const { return config_; }
  const std::string& engine_id() const { return engine_id_; }
  const std::string& fingerprint() const { return fingerprint_; }
  // Where this instance's transfer server listens (a producer); 0 otherwise.
  int port() const;

  // Producer. `block_ids` stay held by the caller until take_released() returns their lease.
  KvLease hold(std::vector<int32_t> block_ids, double now);
  std::vector<KvLease> take_released(double now);

  // Consumer: copy the producer's `remote_blocks` under `lease_id` into `local_blocks` (as
  // many, each in [0, num_blocks); held by the caller until the pull's outcome is taken).
  struct Pull {
    uint64_t ticket = 0;
    std::string host;
    int port = 0;
    std::string lease_id;
    std::vector<int32_t> remote_blocks;
    std::vector<int32_t> local_blocks;
  };
  void start_pull(Pull pull);
  struct PullOutcome {
    uint64_t ticket = 0;
    bool ok = false;
    std::string error;  // names the peer and the cause
    uint64_t bytes = 0;
    double seconds = 0;
  };
  std::vector<PullOutcome> take_finished_pulls();

  // Called from the transfer threads when a pull finished or a lease's pull ended.
  void set_wakeup(std::function<void()> wakeup);
  // When a held lease expires next (engine clock), so an idle engine wakes to free it.
  std::optional<double> next_expiry() const { return leases_.next_expiry(); }

  KvConnectorStats stats() const;

 private:
  void pull_loop();
  void wake();

  KvTransferConfig config_;
  KvCache& cache_;
  std::string fingerprint_;
  std::string engine_id_;
  KvLeaseTable leases_;
  std::unique_ptr<KvTransferServer> server_;  // producer
  std::unique_ptr<KvTransferClient> client_;  // consumer, used by the pull thread only

  mutable std::mutex mutex_;  // guards the fields below
  std::condition_variable pulls_wanted_;
  std::deque<Pull> queued_;
  std::vector<PullOutcome> finished_;
  std::function<void()> wakeup_;
  bool stopping_ = false;
  int64_t pulls_ok_ = 0, pulls_failed_ = 0;
  std::thread puller_;
};

}  // namespace tern::disagg
