// A sequence as the scheduler and the KV cache see it: its tokens (prompt, then output), how
// many of them have their K/V in the cache, and the cache blocks that hold them. Sampling and
// text live with the engine's completion state; nothing here depends on the model.
#pragma once

#include <cstdint>
#include <vector>

namespace tern {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

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
  // Speculative decoding. The drafts this step verifies after the last sampled token (not
  // tokens of the sequence until accepted); and, for a draft model, whose paged cache uses
  // this same block table, how many of the tokens have the draft's K/V there, and how many
  // leading blocks were marked as holding it (BlockManager::mark_draft_computed).
  std::vector<int32_t> draft_token_ids;
  int64_t num_draft_computed_tokens = 0;
  int64_t num_draft_marked_blocks = 0;
  SequenceStatus status = SequenceStatus::kWaiting;
  int64_t num_cached_tokens = 0;  // prompt tokens the prefix cache supplied when first scheduled
  int32_t num_preemptions = 0;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
};

}  // namespace tern
