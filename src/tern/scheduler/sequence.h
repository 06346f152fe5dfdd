// A sequence as the scheduler and the KV cache see it: its tokens (prompt, then output), how
// many of them have their K/V in the cache, and the cache blocks that hold them. Sampling and
// text live with the engine's completion state; nothing here depends on the model.
#pragma once

#include <cstdint>
#include <vector>

namespace tern {

// kWaitingForRemoteKv: a remote cache provides its prompt's K/V; it waits for blocks to load
// them into, then for the load, before it joins the waiting queue.
enum class SequenceStatus { kWaiting, kWaitingForRemoteKv, kRunning, kFinished };

// Copy all layers' K/V of block `src` into block `dst` before the step's forward runs (copy on
// write of a block that sequences share; a draft model's cache copies it too).
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
};

// What a draft model's paged cache, which uses the sequence's block table, holds of it
// (speculative decoding; all zero without a draft model).
struct DraftKvState {
  int64_t num_computed_tokens = 0;  // leading tokens whose draft K/V is in the draft's cache
  int64_t num_marked_blocks = 0;    // leading blocks marked as holding it (mark_draft_computed)
};

struct Sequence {
  int64_t seq_id = 0;
  std::vector<int32_t> token_ids;  // [num_tokens]: prompt then generated
  int64_t num_prompt_tokens = 0;
  // Tokens whose K/V are in the cache (computed, or found in the prefix cache). The next step
  // feeds token_ids[num_computed_tokens …]; a fully computed sequence feeds its last sampled
  // token, whose K/V nobody has computed yet.
  int64_t num_computed_tokens = 0;
  std::vector<int32_t> block_table;  // cache blocks holding tokens 0, block_size, 2·block_size…
  // Prefix-cache keys of the leading full blocks, as far as anyone asked (BlockManager::block_key
  // of the tokens, which never change, so they outlive a preemption).
  std::vector<uint64_t> block_keys;
  int64_t num_keyed_blocks = 0;  // leading blocks of block_table already offered to the cache
  // Speculative decoding: the drafts this step verifies after the last sampled token (not
  // tokens of the sequence until accepted), whichever proposer gave them.
  std::vector<int32_t> draft_token_ids;
  DraftKvState draft_kv;
  SequenceStatus status = SequenceStatus::kWaiting;
  int64_t num_cached_tokens = 0;  // prompt tokens the prefix cache supplied when first scheduled
  int32_t num_preemptions = 0;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
};

}  // namespace tern
