// Scheduler: the two passes of a step (running, then waiting) over one token budget.
#include "tern/scheduler/scheduler.h"

#include <algorithm>
#include <string>
#include <utility>

#include "tern/core/error.h"

namespace tern {

Scheduler::Scheduler(const SchedulerConfig& config, BlockManager& blocks)
    : config_(config), blocks_(blocks) {
  if (config.max_num_seqs < 1)
    throw Error("max_num_seqs must be >= 1, got " + std::to_string(config.max_num_seqs));
  if (config.max_num_batched_tokens < 1)
    throw Error("max_num_batched_tokens must be >= 1, got " +
                std::to_string(config.max_num_batched_tokens));
}

void Scheduler::add(Sequence* seq) {
  if (connector_ && connector_->num_new_matched_tokens(*seq, 0) > 0) {
    seq->status = SequenceStatus::kWaitingForRemoteKv;
    waiting_for_remote_kv_.push_back(seq);
    return;
  }
  enqueue(seq);
}

void Scheduler::enqueue(Sequence* seq) {
  seq->status = SequenceStatus::kWaiting;
  waiting_.push_back(seq);
}

void Scheduler::add_running(Sequence* seq, const Sequence* after) {
  seq->status = SequenceStatus::kRunning;
  auto it = std::find(running_.begin(), running_.end(), after);
  running_.insert(it == running_.end() ? it : it + 1, seq);
}

void Scheduler::fork(const Sequence& parent, Sequence* child, const Sequence* after) {
  blocks_.fork(parent, *child);
  add_running(child, after);
}

std::vector<KvLoadOutcome> Scheduler::update_from_connector() {
  if (!connector_) return {};
  KvConnectorEvents events = connector_->take_events();
  for (Sequence& held : events.released) blocks_.free(held);
  for (const KvLoadOutcome& load : events.finished_loads) {
    Sequence* seq = load.seq;
    switch (load.result) {
      case KvLoadOutcome::Result::kLoaded:
        seq->num_computed_tokens = load.num_loaded_tokens;
        blocks_.cache_full_blocks(*seq);
        enqueue(seq);
        break;
      case KvLoadOutcome::Result::kRecompute:
        blocks_.free(*seq);  // what the load wrote is unkeyed: nobody finds it
        enqueue(seq);
        break;
      case KvLoadOutcome::Result::kFailed:
        blocks_.free(*seq);
        break;
    }
  }
  return std::move(events.finished_loads);
}

void Scheduler::start_remote_loads() {
  while (!waiting_for_remote_kv_.empty()) {
    Sequence* seq = waiting_for_remote_kv_.front();
    // Only what the prefix cache lacks is loaded.
    const std::vector<int32_t> cached = blocks_.find_cached_prefix(*seq);
    const int64_t computed = static_cast<int64_t>(cached.size()) * blocks_.block_size();
    const int64_t remote = connector_->num_new_matched_tokens(*seq, computed);
    std::vector<BlockCopy> copies;  // fresh blocks and cached ones: nothing to copy
    if (!blocks_.allocate(*seq, computed + remote, copies, cached)) return;  // wait for blocks
    waiting_for_remote_kv_.pop_front();
    seq->num_cached_tokens = computed;
    blocks_.count_prefix_query(seq->num_tokens(), computed);
    if (remote == 0) {
      seq->num_computed_tokens = computed;
      enqueue(seq);
      continue;
    }
    connector_->update_state_after_alloc(*seq, computed);
  }
}

void Scheduler::preempt(Sequence* seq, SchedulerStep& step) {
  blocks_.free(*seq);
  seq->status = SequenceStatus::kWaiting;
  seq->num_preemptions++;
  waiting_.push_front(seq);
  step.preempted.push_back(seq);
  ++num_preemptions_;
}

SchedulerStep Scheduler::schedule(const DraftsWanted& drafts_wanted, int64_t max_tokens) {
  SchedulerStep step;
  int64_t budget = max_tokens > 0 ? std::min(max_tokens, config_.max_num_batched_tokens)
                                  : config_.max_num_batched_tokens;

  // Running sequences, oldest first. Preempting takes the newest, possibly this one.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const int64_t remaining = seq->num_tokens() - seq->num_computed_tokens;
    int64_t drafts = 0;
    if (remaining == 1 && drafts_wanted)
      drafts = std::clamp<int64_t>(drafts_wanted(*seq), 0, budget - 1);
    // Drafts never cost anyone their blocks: without room for them the sequence just decodes.
    const bool drafts_fit =
        drafts > 0 && blocks_.allocate(*seq, seq->num_computed_tokens + 1 + drafts, step.copies);
    if (!drafts_fit) drafts = 0;
    const int64_t n = std::min(remaining, budget) + drafts;
    bool self_preempted = false;
    while (!drafts_fit && !blocks_.allocate(*seq, seq->num_computed_tokens + n, step.copies)) {
      Sequence* victim = running_.back();
      running_.pop_back();
      preempt(victim, step);
      if (victim == seq) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    step.chunks.push_back({seq, n, drafts, n - drafts == remaining});
    step.num_tokens += n;
    budget -= n;
    ++i;
  }

  // Waiting sequences, first come first served, unless this step had to preempt (the cache is
  // full: admitting more would only preempt again).
  while (step.preempted.empty() && !waiting_.empty() && budget > 0 &&
         static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    // A sequence whose KV was pulled from a prefill instance arrives holding its blocks, with
    // its prefix-cache hit already counted.
    const bool holds_blocks = !seq->block_table.empty();
    const std::vector<int32_t> cached =
        holds_blocks ? std::vector<int32_t>{} : blocks_.find_cached_prefix(*seq);
    const int64_t computed = holds_blocks
                                 ? seq->num_computed_tokens
                                 : static_cast<int64_t>(cached.size()) * blocks_.block_size();
    const int64_t remaining = seq->num_tokens() - computed;
    if (!config_.enable_chunked_prefill && remaining > budget) break;
    const int64_t n = std::min(remaining, budget);
    if (!blocks_.allocate(*seq, computed + n, step.copies, cached)) break;
    if (!holds_blocks) {
      if (seq->num_preemptions == 0) seq->num_cached_tokens = computed;
      blocks_.count_prefix_query(seq->num_tokens(), computed);
    }
    waiting_.pop_front();
    seq->status = SequenceStatus::kRunning;
    running_.push_back(seq);
    step.chunks.push_back({seq, n, 0, n == remaining});
    step.num_tokens += n;
    budget -= n;
  }
  return step;
}

void Scheduler::complete(const SchedulerStep& step) {
  for (const ScheduledChunk& chunk : step.chunks) {
    chunk.seq->num_computed_tokens += chunk.num_tokens - chunk.num_draft_tokens;
    blocks_.cache_full_blocks(*chunk.seq);
  }
}

void Scheduler::accept_drafts(Sequence& seq, int64_t num_accepted) {
  seq.num_computed_tokens += num_accepted;
  seq.draft_token_ids.clear();
  // The draft model's K/V holds only where its drafts were accepted.
  seq.draft_kv.num_computed_tokens =
      std::min(seq.draft_kv.num_computed_tokens, seq.num_computed_tokens);
  blocks_.trim_to_computed(seq);
  blocks_.cache_full_blocks(seq);
  blocks_.mark_draft_computed(seq);
}

std::optional<disagg::RemoteBlocks> Scheduler::remove(Sequence* seq, bool aborted) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end())
    running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end())
    waiting_.erase(it);
  if (auto it = std::find(waiting_for_remote_kv_.begin(), waiting_for_remote_kv_.end(), seq);
      it != waiting_for_remote_kv_.end())
    waiting_for_remote_kv_.erase(it);
  std::optional<disagg::RemoteBlocks> held;
  if (connector_) held = connector_->request_finished(*seq, aborted);
  blocks_.free(*seq);
  seq->status = SequenceStatus::kFinished;
  return held;
}

}  // namespace tern
