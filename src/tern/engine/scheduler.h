// One engine step's plan, in vLLM v1's shape: a token budget (max_num_batched_tokens) and a
// sequence cap (max_num_seqs). Running sequences go first (a decode is one token, a prompt
// that is part way through prefill gets its next chunk), then waiting ones, first come first
// served, fill what is left of the budget (chunked prefill). When the cache runs out of
// blocks, the newest running sequence is preempted: its blocks are freed and it goes back to
// the front of the queue, to be recomputed later (its prefix may still be cached).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "tern/engine/block_manager.h"
#include "tern/engine/sequence.h"

namespace tern {

struct SchedulerConfig {
  int32_t max_num_seqs = 256;             // sequences in one step at most
  int64_t max_num_batched_tokens = 512;   // tokens in one step at most
  bool enable_chunked_prefill = true;     // false: a prompt runs whole or waits
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t num_tokens = 0;  // feeds token_ids[seq->num_computed_tokens, + num_tokens)
  bool sample = false;     // the chunk reaches the sequence's end: its last row is sampled
};

struct SchedulerStep {
  std::vector<ScheduledChunk> chunks;
  std::vector<BlockCopy> copies;    // done before the forward
  std::vector<Sequence*> preempted; // went back to the waiting queue this step
  int64_t num_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  // Throws tern::Error for a cap or budget < 1.
  Scheduler(const SchedulerConfig& config, BlockManager& blocks);

  // Queues a sequence at the back (FCFS). The caller keeps it alive until it is removed.
  void add(Sequence* seq);
  // Puts a sequence forked from a running one straight into the running set, right after it.
  void add_running(Sequence* seq, const Sequence* after);

  SchedulerStep schedule();
  // After the forward of `step`: the chunks' tokens are computed; full blocks enter the
  // prefix cache.
  void complete(const SchedulerStep& step);

  // Takes a sequence out of the queues (finished or aborted) and frees its blocks.
  void remove(Sequence* seq);

  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  void preempt(Sequence* seq, SchedulerStep& step);

  SchedulerConfig config_;
  BlockManager& blocks_;
  std::vector<Sequence*> running_;  // oldest first
  std::deque<Sequence*> waiting_;
  int64_t num_preemptions_ = 0;
};

}  // namespace tern
