// KvLeaseTable: one mutex over a small map; the transfer thread and the engine thread each
// touch it once per pull, never on a per-token path.
#include "tern/disagg/kv_lease_table.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "tern/core/error.h"

namespace tern::disagg {
namespace {

constexpr size_t kRememberedEnded = 4096;

std::string random_lease_id() {
  static thread_local std::mt19937_64 rng([] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }());
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return text;
}

}  // namespace

KvLeaseTable::KvLeaseTable(double lease_seconds) : lease_seconds_(lease_seconds) {
  if (!(lease_seconds > 0))
    throw Error("--kv-lease-seconds must be > 0, got " + std::to_string(lease_seconds));
}

KvLease KvLeaseTable::grant(std::vector<int32_t> block_ids, double now) {
  std::lock_guard lock(mutex_);
  Entry entry;
  entry.lease.id = random_lease_id();
  entry.lease.block_ids = std::move(block_ids);
  entry.lease.expires_at = now + lease_seconds_;
  KvLease lease = entry.lease;
  leases_.emplace(lease.id, std::move(entry));
  ++stats_.granted;
  ++stats_.held;
  return lease;
}

std::optional<std::string> KvLeaseTable::begin_pull(const std::string& id,
                                                    std::span<const int32_t> block_ids,
                                                    double now) {
  std::lock_guard lock(mutex_);
  const auto it = leases_.find(id);
  if (it == leases_.end()) {
    for (const auto& [ended, why] : ended_)
      if (ended == id) return "lease " + id + " " + why;
    return "unknown lease '" + id + "'";
  }
  Entry& entry = it->second;
  if (entry.state == State::kPulling) return "lease " + id + " is being pulled already";
  if (entry.state == State::kDone) return "lease " + id + " was already used";
  if (now >= entry.lease.expires_at) return "lease " + id + " has expired";
  const std::vector<int32_t>& held = entry.lease.block_ids;
  for (int32_t b : block_ids)
    if (std::find(held.begin(), held.end(), b) == held.end())
      return "lease " + id + " does not hold block " + std::to_string(b);
  entry.state = State::kPulling;
  return std::nullopt;
}

void KvLeaseTable::end_pull(const std::string& id, bool sent) {
  std::lock_guard lock(mutex_);
  const auto it = leases_.find(id);
  if (it == leases_.end() || it->second.state != State::kPulling) return;
  it->second.state = State::kDone;
  ++(sent ? stats_.pulled : stats_.failed);
}

std::vector<KvLease> KvLeaseTable::take_released(double now) {
  std::lock_guard lock(mutex_);
  std::vector<KvLease> released;
  for (auto it = leases_.begin(); it != leases_.end();) {
    Entry& entry = it->second;
    const bool expired = entry.state == State::kWaiting && now >= entry.lease.expires_at;
    if (entry.state != State::kDone && !expired) {
      ++it;
      continue;
    }
    if (expired) ++stats_.expired;
    remember_ended(it->first, expired ? "has expired" : "was already used");
    released.push_back(std::move(entry.lease));
    --stats_.held;
    it = leases_.erase(it);
  }
  return released;
}

std::optional<double> KvLeaseTable::next_expiry() const {
  std::lock_guard lock(mutex_);
  std::optional<double> next;
  for (const auto& [id, entry] : leases_)
    if (entry.state == State::kWaiting && (!next || entry.lease.expires_at < *next))
      next = entry.lease.expires_at;
  return next;
}

KvLeaseTable::Stats KvLeaseTable::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void KvLeaseTable::remember_ended(const std::string& id, const char* why) {
  ended_.emplace_back(id, why);
  if (ended_.size() > kRememberedEnded) ended_.pop_front();
}

}  // namespace tern::disagg
