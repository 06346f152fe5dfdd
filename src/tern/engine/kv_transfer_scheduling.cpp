// KvTransferScheduling: leases for finished prompts, pulls into the blocks the scheduler gave.
#include "tern/engine/kv_transfer_scheduling.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

namespace tern {

KvTransferScheduling::KvTransferScheduling(disagg::KvConnector& connector, int block_size,
                                           double (*clock)())
    : connector_(connector), block_size_(block_size), clock_(clock) {}

void KvTransferScheduling::add(const Sequence& seq, const disagg::KvTransferParams& params) {
  if (!params.empty()) params_.emplace(&seq, params);
}

int64_t KvTransferScheduling::num_new_matched_tokens(const Sequence& seq,
                                                     int64_t num_computed_tokens) {
  const auto it = params_.find(&seq);
  if (it == params_.end() || !it->second.remote_prefill) return 0;
  // Every prompt token but the last: that one runs here to give the first token's logits (a
  // one-token prompt has nothing to pull).
  return std::max<int64_t>(0, seq.num_prompt_tokens - 1 - num_computed_tokens);
}

void KvTransferScheduling::update_state_after_alloc(Sequence& seq, int64_t num_computed_tokens) {
  const disagg::RemoteBlocks& remote = *params_.at(&seq).remote_prefill;
  const auto first = static_cast<size_t>(num_computed_tokens / block_size_);
  const auto end = static_cast<size_t>((seq.num_prompt_tokens - 1 + block_size_ - 1) / block_size_);
  disagg::KvConnector::Pull pull;
  for (size_t i = first; i < end; ++i) {
    pull.remote_blocks.push_back(remote.block_ids[i]);
    pull.local_blocks.push_back(seq.block_table[i]);
  }
  pull.ticket = next_pull_ticket_++;
  pull.host = remote.host;
  pull.port = remote.port;
  pull.lease_id = remote.lease_id;
  pulls_.emplace(pull.ticket, &seq);
  connector_.start_pull(std::move(pull));
}

std::optional<disagg::RemoteBlocks> KvTransferScheduling::request_finished(Sequence& seq,
                                                                           bool aborted) {
  const auto it = params_.find(&seq);
  if (it == params_.end()) return std::nullopt;
  const bool remote_decode = it->second.do_remote_decode;
  params_.erase(it);
  // Aborted mid-pull: the pull writes into its blocks until it ends.
  for (auto pull = pulls_.begin(); pull != pulls_.end(); ++pull)
    if (pull->second == &seq) {
      orphaned_pulls_[pull->first].block_table = std::exchange(seq.block_table, {});
      pulls_.erase(pull);
      break;
    }
  if (!remote_decode || aborted) return std::nullopt;
  return hold(seq);
}

disagg::RemoteBlocks KvTransferScheduling::hold(Sequence& seq) {
  disagg::RemoteBlocks where;
  where.engine_id = connector_.engine_id();
  where.host = connector_.config().ip;
  where.port = connector_.port();
  // The decode instance pulls every prompt token's K/V but the last one's (it computes that one
  // itself): hold the blocks of those tokens, none for a one-token prompt. The rest go back as
  // for any finished sequence.
  const int64_t pulled_blocks = (seq.num_prompt_tokens - 1 + block_size_ - 1) / block_size_;
  const auto pulled = static_cast<ptrdiff_t>(
      std::min<int64_t>(pulled_blocks, static_cast<int64_t>(seq.block_table.size())));
  if (pulled == 0) return where;
  Sequence held;
  held.block_table.assign(seq.block_table.begin(), seq.block_table.begin() + pulled);
  seq.block_table.erase(seq.block_table.begin(), seq.block_table.begin() + pulled);
  const double time = clock_();
  const disagg::KvLease lease = connector_.hold(held.block_table, time);
  where.lease_id = lease.id;
  where.block_ids = held.block_table;
  const double wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  where.lease_expires_at = wall + (lease.expires_at - time);
  held_.emplace(lease.id, std::move(held));
  return where;
}

KvConnectorEvents KvTransferScheduling::take_events() {
  KvConnectorEvents events;
  for (const disagg::KvLease& lease : connector_.take_released(clock_())) {
    const auto it = held_.find(lease.id);
    if (it == held_.end()) continue;
    events.released.push_back(std::move(it->second));
    held_.erase(it);
  }
  for (disagg::KvConnector::PullOutcome& pull : connector_.take_finished_pulls()) {
    if (auto orphan = orphaned_pulls_.find(pull.ticket); orphan != orphaned_pulls_.end()) {
      events.released.push_back(std::move(orphan->second));
      orphaned_pulls_.erase(orphan);
      continue;
    }
    const auto it = pulls_.find(pull.ticket);
    if (it == pulls_.end()) continue;
    KvLoadOutcome load;
    load.seq = it->second;
    pulls_.erase(it);
    load.bytes = pull.bytes;
    load.seconds = pull.seconds;
    if (pull.ok) {
      load.result = KvLoadOutcome::Result::kLoaded;
      load.num_loaded_tokens = load.seq->num_prompt_tokens - 1;
    } else {
      load.result =
          connector_.config().load_failure_policy == disagg::KvLoadFailurePolicy::kRecompute
              ? KvLoadOutcome::Result::kRecompute
              : KvLoadOutcome::Result::kFailed;
      load.error = std::move(pull.error);
    }
    events.finished_loads.push_back(std::move(load));
  }
  return events;
}

}  // namespace tern
