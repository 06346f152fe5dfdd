// What the prefix cache took in and lost, as vLLM's KV cache events (vllm/distributed/
// kv_events.py) say it to a router that indexes which instance holds which prompt prefixes
// (llm-d's KV-cache-aware scorer): a block stored under its key, blocks evicted, everything
// cleared. The block manager records them in the order they happened.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

namespace tern::kv_events {

// Full blocks that entered the prefix cache, each chained to the one before: block_hashes[0]'s
// parent is parent_block_hash (none for a prompt's first block), block_hashes[i]'s is
// block_hashes[i - 1]. token_ids holds the blocks' tokens, block_size per block.
struct BlockStored {
  std::vector<uint64_t> block_hashes;
  std::optional<uint64_t> parent_block_hash;
  std::vector<int32_t> token_ids;
  int32_t block_size = 0;
};

// Blocks evicted from the prefix cache (their keys no longer find them).
struct BlockRemoved {
  std::vector<uint64_t> block_hashes;
};

// The prefix cache was emptied (POST /reset_prefix_cache).
struct AllBlocksCleared {};

using KvCacheEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

}  // namespace tern::kv_events
