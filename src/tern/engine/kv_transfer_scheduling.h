// The scheduler's side of prefill/decode disaggregation over a disagg::KvConnector (vLLM's
// KVConnector scheduler hooks): which sequences pull their prompt's K/V and into which blocks,
// the pulls in flight, and the finished prompts whose blocks are held under leases for decode
// instances. It never allocates or frees a block: the scheduler does, when this says.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "tern/disagg/kv_connector.h"
#include "tern/disagg/kv_transfer_params.h"
#include "tern/scheduler/kv_connector_hooks.h"

namespace tern {

class KvTransferScheduling final : public KvConnectorHooks {
 public:
  // `connector` must outlive this; `clock` is the engine's (lease expiry, LLMEngine::now).
  KvTransferScheduling(disagg::KvConnector& connector, int block_size, double (*clock)());

  // What a sequence's request asked (before it is added to the scheduler): do_remote_decode
  // holds its prompt's blocks when it finishes; remote_prefill pulls its prompt's K/V (all but
  // the last token, which runs here to give the first token's logits).
  void add(const Sequence& seq, const disagg::KvTransferParams& params);

  int64_t num_new_matched_tokens(const Sequence& seq, int64_t num_computed_tokens) override;
  void update_state_after_alloc(Sequence& seq, int64_t num_computed_tokens) override;
  std::optional<disagg::RemoteBlocks> request_finished(Sequence& seq, bool aborted) override;
  KvConnectorEvents take_events() override;

  // Leases held or pulls in flight (of live sequences or finished ones).
  bool has_pending() const { return !held_.empty() || !pulls_.empty() || !orphaned_pulls_.empty(); }

 private:
  // A finished prompt for a decode instance: its blocks move under a lease.
  disagg::RemoteBlocks hold(Sequence& seq);

  disagg::KvConnector& connector_;
  int block_size_;
  double (*clock_)();
  std::unordered_map<const Sequence*, disagg::KvTransferParams> params_;  // of live sequences
  // Producer: lease id → the blocks it holds. Consumer: pulls in flight by ticket, and the
  // blocks of pulls whose sequences finished (aborted) before them, which the pull writes into.
  std::unordered_map<std::string, Sequence> held_;
  std::unordered_map<uint64_t, Sequence*> pulls_;
  std::unordered_map<uint64_t, Sequence> orphaned_pulls_;
  uint64_t next_pull_ticket_ = 0;
};

}  // namespace tern
