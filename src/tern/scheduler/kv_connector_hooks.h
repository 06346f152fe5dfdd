// What the scheduler asks a KV connector (vLLM v1's KVConnector, scheduler side), so that it
// stays the one allocator of the block pool: the connector says which tokens a remote cache
// provides and which blocks it still needs; the scheduler allocates and frees them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tern/disagg/kv_transfer_params.h"
#include "tern/scheduler/sequence.h"

namespace tern {

// A load into a sequence's blocks ended.
struct KvLoadOutcome {
  enum class Result { kLoaded, kRecompute, kFailed };
  Sequence* seq = nullptr;
  Result result = Result::kFailed;
  int64_t num_loaded_tokens = 0;  // kLoaded: its leading tokens whose K/V the blocks now hold
  std::string error;              // why it did not load (names the peer and the cause)
  uint64_t bytes = 0;
  double seconds = 0;
};

// What changed on the connector's side since the last look.
struct KvConnectorEvents {
  // Blocks the connector held and needs no more (leases that ended, loads of finished
  // sequences that ended): the scheduler frees them.
  std::vector<Sequence> released;
  std::vector<KvLoadOutcome> finished_loads;  // of sequences still in the scheduler
};

class KvConnectorHooks {
 public:
  virtual ~KvConnectorHooks() = default;

  // Tokens of `seq` past its first `num_computed_tokens` (a local prefix-cache hit) whose K/V a
  // remote cache provides; 0: none. A sequence with some waits for blocks and their load
  // (SequenceStatus::kWaitingForRemoteKv) before it is scheduled.
  virtual int64_t num_new_matched_tokens(const Sequence& seq, int64_t num_computed_tokens) = 0;
  // The scheduler gave `seq` blocks for its first num_computed_tokens + num_new_matched_tokens
  // tokens: the connector starts loading the new ones; the blocks stay until the load ends.
  virtual void update_state_after_alloc(Sequence& seq, int64_t num_computed_tokens) = 0;
  // `seq` leaves the scheduler (finished, or `aborted`). The connector takes from its block
  // table the blocks it still needs (a running load's, a finished prompt's held for a remote
  // instance) and gives them back through take_events(); the scheduler frees the rest. Returns
  // where a remote instance finds the held K/V, when it holds some for one.
  virtual std::optional<disagg::RemoteBlocks> request_finished(Sequence& seq, bool aborted) = 0;
  // Each step, before scheduling.
  virtual KvConnectorEvents take_events() = 0;
};

}  // namespace tern
