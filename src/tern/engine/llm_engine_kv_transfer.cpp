// LLMEngine's side of prefill/decode disaggregation: a prefill for a decode instance ends by
// moving its blocks under a lease; a request with remote KV waits for blocks, pulls what the
// prefix cache lacks, then joins the queue as a prefix-cache hit would.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "tern/engine/llm_engine.h"
#include "tern/engine/llm_engine_state.h"

namespace tern {

bool LLMEngine::has_work_to_step() const {
  return scheduler_.num_running() > 0 || scheduler_.num_waiting() > 0 || !aborted_.empty();
}

bool LLMEngine::has_pending_transfers() const {
  return !held_.empty() || !pulls_.empty() || !orphaned_pulls_.empty() || !awaiting_blocks_.empty();
}

std::optional<double> LLMEngine::next_transfer_deadline() const {
  return connector_ ? connector_->next_expiry() : std::nullopt;
}

void LLMEngine::set_transfer_wakeup(std::function<void()> wakeup) {
  if (connector_) connector_->set_wakeup(std::move(wakeup));
}

void LLMEngine::hold_for_remote_decode(Completion& c, double time) {
  disagg::RemoteBlocks where;
  where.engine_id = connector_->engine_id();
  where.host = connector_->config().ip;
  where.port = connector_->port();
  // The decode instance pulls every prompt token's KV but the last one's (it computes that one
  // itself): hold the blocks of those tokens, none for a one-token prompt. The rest go back
  // as for any finished request.
  const auto pulled =
      static_cast<size_t>(std::min<int64_t>(blocks_.blocks_for(c.seq.num_prompt_tokens - 1),
                                            static_cast<int64_t>(c.seq.block_table.size())));
  if (pulled > 0) {
    Sequence held;
    held.block_table.assign(c.seq.block_table.begin(),
                            c.seq.block_table.begin() + static_cast<ptrdiff_t>(pulled));
    c.seq.block_table.erase(c.seq.block_table.begin(),
                            c.seq.block_table.begin() + static_cast<ptrdiff_t>(pulled));
    const disagg::KvLease lease = connector_->hold(held.block_table, time);
    where.lease_id = lease.id;
    where.block_ids = held.block_table;
    const double wall =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    where.lease_expires_at = wall + (lease.expires_at - time);
    held_.emplace(lease.id, std::move(held));
  }
  c.request->held_kv = std::move(where);
}

void LLMEngine::poll_transfers(std::vector<RequestOutput>& outputs) {
  const double time = now();
  for (const disagg::KvLease& lease : connector_->take_released(time)) {
    const auto it = held_.find(lease.id);
    if (it == held_.end()) continue;
    blocks_.free(it->second);
    held_.erase(it);
  }
  for (disagg::KvConnector::PullOutcome& pull : connector_->take_finished_pulls()) {
    if (auto orphan = orphaned_pulls_.find(pull.ticket); orphan != orphaned_pulls_.end()) {
      blocks_.free(orphan->second);
      orphaned_pulls_.erase(orphan);
      continue;
    }
    const auto it = pulls_.find(pull.ticket);
    if (it == pulls_.end()) continue;
    Completion& c = *it->second;
    pulls_.erase(it);
    c.request->metrics.kv_transfer_seconds = pull.seconds;
    c.request->metrics.kv_transfer_bytes = pull.bytes;
    if (pull.ok) {
      // The pulled blocks hold every prompt token but the last, which runs here to give the
      // first token's logits (as a prefix-cache hit does).
      c.seq.num_computed_tokens = c.seq.num_prompt_tokens - 1;
      blocks_.cache_full_blocks(c.seq);
      scheduler_.add(&c.seq);
    } else if (connector_->config().load_failure_policy ==
               disagg::KvLoadFailurePolicy::kRecompute) {
      std::fprintf(stderr, "tern: request %s: %s; prefilling it here\n", c.request->id.c_str(),
                   pull.error.c_str());
      blocks_.free(c.seq);  // what the pull wrote is unkeyed, nobody finds it
      scheduler_.add(&c.seq);
    } else {
      fail(c, pull.error, time, outputs);
    }
  }
  start_remote_prefills();
}

void LLMEngine::start_remote_prefills() {
  while (!awaiting_blocks_.empty()) {
    Completion& c = *awaiting_blocks_.front();
    Sequence& seq = c.seq;
    const int64_t pulled_tokens = seq.num_prompt_tokens - 1;
    const std::vector<int32_t> cached = blocks_.find_cached_prefix(seq);
    std::vector<BlockCopy> copies;  // fresh blocks and cached ones: nothing to copy
    if (!blocks_.allocate(seq, pulled_tokens, copies, cached)) return;  // wait for blocks
    awaiting_blocks_.pop_front();
    seq.num_cached_tokens = static_cast<int64_t>(cached.size()) * blocks_.block_size();
    blocks_.count_prefix_query(seq.num_tokens(), seq.num_cached_tokens);
    // Only what the prefix cache lacks moves.
    const disagg::RemoteBlocks& remote = *c.request->kv.remote_prefill;
    disagg::KvConnector::Pull pull;
    for (size_t i = cached.size(); i < static_cast<size_t>(blocks_.blocks_for(pulled_tokens));
         ++i) {
      pull.remote_blocks.push_back(remote.block_ids[i]);
      pull.local_blocks.push_back(seq.block_table[i]);
    }
    if (pull.local_blocks.empty()) {
      seq.num_computed_tokens = pulled_tokens;
      scheduler_.add(&seq);
      continue;
    }
    pull.ticket = next_pull_ticket_++;
    pull.host = remote.host;
    pull.port = remote.port;
    pull.lease_id = remote.lease_id;
    pulls_.emplace(pull.ticket, &c);
    connector_->start_pull(std::move(pull));
  }
}

void LLMEngine::fail(Completion& c, const std::string& error, double time,
                     std::vector<RequestOutput>& outputs) {
  Request& request = *c.request;
  CompletionOutput& out = output_for(c, outputs);
  finish(c, "abort", time);
  request.forked = true;  // no completions are coming
  out.finish_reason = c.finish_reason;
  for (RequestOutput& o : outputs)
    if (o.request_id == request.id) {
      o.metrics = request.metrics;
      o.finished = request.finished();
      o.error = error;
    }
}

}  // namespace tern
