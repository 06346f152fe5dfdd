// The prefill side's promise to a decode side: blocks that hold a prefilled prompt's KV, kept
// under a lease until they are pulled or the lease runs out. The engine thread grants leases
// and frees what take_released() hands back; the transfer thread checks a pull against its
// lease and ends it. A lease serves one pull: afterwards (sent or not) its blocks go back.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace tern::disagg {

struct KvLease {
  std::string id;                  // 32 hex digits, unguessable
  std::vector<int32_t> block_ids;  // the blocks it holds, in the sequence's order
  double expires_at = 0;           // on the engine's steady clock (LLMEngine::now())
};

class KvLeaseTable {
 public:
  explicit KvLeaseTable(double lease_seconds);

  // Engine thread: `block_ids` are held (the caller keeps their references) until the lease
  // is released.
  KvLease grant(std::vector<int32_t> block_ids, double now);

  // Transfer thread: a pull under `id` of `block_ids` (each must be one of the lease's). On
  // success the lease is in use (it no longer expires) and nullopt is returned; otherwise the
  // reason, for the puller: unknown, expired, already used or in use, a block it does not hold.
  std::optional<std::string> begin_pull(const std::string& id, std::span<const int32_t> block_ids,
                                        double now);
  // Transfer thread: the pull that begin_pull admitted is over (`sent`: the data went out).
  // Either way the lease has served and its blocks are released.
  void end_pull(const std::string& id, bool sent);

  // Engine thread: the leases that ended (pulled, failed) or expired by `now`, whose blocks the
  // caller frees now. Expiry is counted here.
  std::vector<KvLease> take_released(double now);

  // The earliest expiry of a lease still waiting for its pull (nullopt: none), so an idle
  // engine knows when to wake.
  std::optional<double> next_expiry() const;

  struct Stats {
    int64_t held = 0;     // leases whose blocks are still held
    int64_t granted = 0;  // totals since start
    int64_t pulled = 0;
    int64_t failed = 0;  // a pull that began and did not send
    int64_t expired = 0;
  };
  Stats stats() const;

 private:
  enum class State { kWaiting, kPulling, kDone };
  struct Entry {
    KvLease lease;
    State state = State::kWaiting;
  };
  // Why an id is no longer valid, for a clear refusal of a late or repeated pull.
  void remember_ended(const std::string& id, const char* why);

  const double lease_seconds_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> leases_;
  std::deque<std::pair<std::string, const char*>> ended_;  // the most recent few thousand
  Stats stats_;
};

}  // namespace tern::disagg
