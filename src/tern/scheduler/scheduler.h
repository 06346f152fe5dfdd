// One engine step's plan, in vLLM v1's shape: a token budget (max_num_batched_tokens) and a
// sequence cap (max_num_seqs). Running sequences go first (a decode is one token, a prompt
// that is part way through prefill gets its next chunk), then waiting ones, first come first
// served, fill what is left of the budget (chunked prefill). When the cache runs out of
// blocks, the newest running sequence is preempted: its blocks are freed and it goes back to
// the front of the queue, to be recomputed later (its prefix may still be cached). With a KV
// connector, a sequence whose prompt's K/V a remote cache provides first waits for blocks and
// for their load (kWaitingForRemoteKv), then joins the queue holding them.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "tern/scheduler/block_manager.h"
#include "tern/scheduler/kv_connector_hooks.h"
#include "tern/scheduler/sequence.h"

namespace tern {

struct SchedulerConfig {
  int32_t max_num_seqs = 256;            // sequences in one step at most
  int64_t max_num_batched_tokens = 512;  // tokens in one step at most
  bool enable_chunked_prefill = true;    // false: a prompt runs whole or waits
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  // Feeds token_ids[seq->num_computed_tokens, + num_tokens - num_draft_tokens), then the
  // first num_draft_tokens of seq->draft_token_ids (a verify: every row is sampled).
  int64_t num_tokens = 0;
  int64_t num_draft_tokens = 0;
  bool sample = false;  // the chunk reaches the sequence's end: its last row is sampled
};

struct SchedulerStep {
  std::vector<ScheduledChunk> chunks;
  std::vector<BlockCopy> copies;     // done before the forward
  std::vector<Sequence*> preempted;  // went back to the waiting queue this step
  int64_t num_tokens = 0;
  bool empty() const { return chunks.empty(); }
  // The proposer gave chunk `i` only `num_drafts` of the drafts it has room for: the chunk and
  // the step shrink to them (its blocks stay until accept_drafts trims them).
  void cut_drafts(size_t i, int64_t num_drafts) {
    const int64_t dropped = chunks[i].num_draft_tokens - num_drafts;
    chunks[i].num_tokens -= dropped;
    chunks[i].num_draft_tokens = num_drafts;
    num_tokens -= dropped;
  }
};

class Scheduler {
 public:
  // Throws tern::Error for a cap or budget < 1.
  Scheduler(const SchedulerConfig& config, BlockManager& blocks);

  // Disaggregation: the connector whose remote caches provide K/V (see KvConnectorHooks); it
  // must outlive this.
  void set_kv_connector(KvConnectorHooks* connector) { connector_ = connector; }

  // Queues a sequence at the back (FCFS), or, when the connector has K/V of it, at the back of
  // those waiting for blocks to load it into. The caller keeps it alive until it is removed.
  void add(Sequence* seq);
  // Puts a sequence forked from a running one straight into the running set, right after it.
  void add_running(Sequence* seq, const Sequence* after);
  // `child` shares every block of running `parent` (n > 1 completions) and runs right after
  // `after` (the parent, or its previous child).
  void fork(const Sequence& parent, Sequence* child, const Sequence* after);

  // Disaggregation, before scheduling: frees the blocks the connector let go and takes the
  // loads that ended; a loaded sequence joins the queue holding its blocks (as a prefix-cache
  // hit would), one to recompute joins it holding none, and a failed one is left to the
  // caller, who removes it. Returns the ended loads, in the order they ended.
  std::vector<KvLoadOutcome> update_from_connector();
  // Gives blocks to the sequences waiting for remote K/V, first come first served, as far as
  // free blocks go, and starts their loads (one whose blocks the prefix cache holds already
  // joins the queue). Called before scheduling and after finished sequences freed blocks.
  void start_remote_loads();

  // How many drafts a decoding sequence would verify this step (speculative decoding).
  using DraftsWanted = std::function<int64_t(const Sequence&)>;

  // One step's plan. With `drafts_wanted`, a running sequence that decodes asks for 1 + its
  // drafts of the budget and blocks for them; drafts the budget or the free blocks cannot
  // hold are dropped before anyone is preempted for them. `max_tokens` > 0: this step's token
  // budget, when less than max_num_batched_tokens (a step sized by time, LLMEngine).
  SchedulerStep schedule(const DraftsWanted& drafts_wanted = nullptr, int64_t max_tokens = 0);
  // After the forward of `step`: the chunks' tokens are computed (of a verify, only the token
  // before the drafts, until accept_drafts says how many drafts hold); full blocks enter the
  // prefix cache.
  void complete(const SchedulerStep& step);
  // After a verify of `seq` whose first `num_accepted` drafts were accepted (and appended to
  // its tokens with the target's next token): their K/V count as computed, blocks that held
  // only rejected positions are freed, and newly full blocks enter the prefix cache.
  void accept_drafts(Sequence& seq, int64_t num_accepted);

  // Takes a sequence out of the queues (finished, or `aborted`) and frees its blocks, except
  // those the connector still needs; returns where a remote instance finds the K/V the
  // connector holds for it (a finished prompt of a prefill for a decode instance).
  std::optional<disagg::RemoteBlocks> remove(Sequence* seq, bool aborted = false);

  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  const std::vector<Sequence*>& running() const { return running_; }  // oldest first
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  // Sequences waiting for blocks to load remote K/V into (their loads in flight not counted).
  int64_t num_waiting_for_remote_kv() const {
    return static_cast<int64_t>(waiting_for_remote_kv_.size());
  }
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  void preempt(Sequence* seq, SchedulerStep& step);
  void enqueue(Sequence* seq);  // at the back of the waiting queue

  SchedulerConfig config_;
  BlockManager& blocks_;
  std::vector<Sequence*> running_;  // oldest first
  std::deque<Sequence*> waiting_;
  KvConnectorHooks* connector_ = nullptr;
  std::deque<Sequence*> waiting_for_remote_kv_;  // for blocks, FCFS; then the connector has them
  int64_t num_preemptions_ = 0;
};

}  // namespace tern
