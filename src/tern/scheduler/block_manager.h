// The paged KV cache's bookkeeping (vLLM's KVCacheManager and BlockPool): which cache block
// belongs to which sequence, reference counts for blocks that sequences share (a common
// prefix, the prompt of n > 1 completions), and the prefix cache.
//
// Prefix caching: a full block's key is hash(parent block's key, its tokens); a hit must also
// match the stored tokens and parent key, so a hash collision can never hand out wrong K/V.
// Freed blocks keep their key and sit in an LRU free list; a later prompt with the same prefix
// takes them back, and only a block popped for new use loses its key. Partial blocks are
// never cached; a shared partial block is copied when a sequence writes to it (copy on write).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tern/kv_events/kv_cache_event.h"
#include "tern/scheduler/sequence.h"

namespace tern {

class BlockManager {
 public:
  // Throws tern::Error unless num_blocks >= 1 and block_size >= 1.
  BlockManager(int64_t num_blocks, int block_size, bool enable_prefix_caching);

  // The cached blocks that hold the longest prefix of `seq`'s tokens, for a sequence that
  // holds no blocks. Never all of its tokens: the last one must run to give logits. Takes
  // nothing yet; pass the result to allocate().
  std::vector<int32_t> find_cached_prefix(Sequence& seq);

  // Gives `seq` the blocks to hold its first `num_tokens` tokens: first the `cached_prefix`
  // blocks (for a sequence that holds none; its num_computed_tokens becomes their length),
  // then fresh ones; a shared last block that the step will write into is replaced by a copy
  // (added to `copies`). Returns false, changing nothing, when there are not enough free blocks.
  bool allocate(Sequence& seq, int64_t num_tokens, std::vector<BlockCopy>& copies,
                std::span<const int32_t> cached_prefix = {});

  // After a step computed `seq` up to seq.num_computed_tokens: enters its newly full blocks
  // into the prefix cache.
  void cache_full_blocks(Sequence& seq);

  // Speculative decoding gives back what a verify step took for drafts it rejected: the blocks
  // past those that hold seq.num_computed_tokens (they held only rejected positions).
  void trim_to_computed(Sequence& seq);

  // A draft model keeps its K/V in a cache of its own indexed by these same block ids. After
  // its forwards, marks the full blocks of `seq` whose every token has the draft's K/V too
  // (seq.draft_kv, counting only computed tokens), so that a prefix-cache hit on them also
  // spares the draft; allocate() gives a hit sequence the marked leading blocks as its
  // draft_kv.
  void mark_draft_computed(Sequence& seq);

  // Releases `seq`'s blocks (last block first into the LRU, so a prompt's tail is evicted
  // before its head); the sequence holds nothing and has nothing computed afterwards.
  void free(Sequence& seq);

  // `child` shares every block of `parent` (tokens, computed count and keys are copied too).
  void fork(const Sequence& parent, Sequence& child);

  // Empties the prefix cache: every cached block forgets its key. Only when no sequence holds a
  // block (as vLLM's reset_prefix_cache): false, changing nothing, otherwise.
  bool reset_prefix_cache();

  // KV cache events: once on, every block the prefix cache takes in (cache_full_blocks) or
  // loses (evicted for new use, reset) is recorded in order until take_events() hands them
  // over. Stores of one call are one BlockStored, evictions in a row one BlockRemoved.
  void record_events(bool on) { record_events_ = on; }
  std::vector<kv_events::KvCacheEvent> take_events() { return std::exchange(events_, {}); }

  // The keys of the blocks the prefix cache holds now, with their parents and tokens (what a
  // router rebuilds from the events), for tests.
  struct CachedBlock {
    uint64_t key, parent_key;
    std::vector<int32_t> tokens;
  };
  std::vector<CachedBlock> cached_blocks() const;

  // Blocks needed to hold `num_tokens` tokens.
  int64_t blocks_for(int64_t num_tokens) const {
    return (num_tokens + block_size_ - 1) / block_size_;
  }

  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t num_free_blocks() const { return num_free_; }
  int block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Fraction of blocks held by sequences (cached free blocks count as free), vLLM's kv usage.
  double usage() const { return 1.0 - static_cast<double>(num_free_) / num_blocks(); }
  int32_t ref_count(int32_t block) const { return blocks_[static_cast<size_t>(block)].ref_count; }
  int64_t num_cached_blocks() const { return static_cast<int64_t>(cached_.size()); }

  // Prefix-cache counters in tokens (vLLM's prefix_cache_queries / prefix_cache_hits): every
  // admitted sequence adds its length to queries and its cache hit to hits.
  int64_t prefix_queries() const { return prefix_queries_; }
  int64_t prefix_hits() const { return prefix_hits_; }
  void count_prefix_query(int64_t queried_tokens, int64_t hit_tokens) {
    prefix_queries_ += queried_tokens;
    prefix_hits_ += hit_tokens;
  }

  // The key of a full block of `tokens` after a block whose key is `parent` (kRootKey first).
  static uint64_t block_key(uint64_t parent, std::span<const int32_t> tokens);
  static constexpr uint64_t kRootKey = 0x7465726e5f6b7631ull;  // "tern_kv1"

 private:
  struct Block {
    int32_t ref_count = 0;
    bool has_key = false;
    uint64_t key = 0;
    uint64_t parent_key = 0;
    std::vector<int32_t> tokens;   // a cached block's tokens, to confirm a hit
    int32_t prev = -1, next = -1;  // the free list (LRU: head is reused first)
    bool in_free_list = false;
    bool has_draft_kv = false;  // the draft model's cache holds this block's tokens too
  };

  int32_t pop_free_block();
  void push_free(int32_t block, bool to_front);
  void unlink_free(int32_t block);
  void release(int32_t block, bool to_front);
  // The key of `seq`'s block `index` (tokens known and full), extending seq.block_keys.
  uint64_t key_of(Sequence& seq, int64_t index);

  int block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  int32_t free_head_ = -1, free_tail_ = -1;
  int64_t num_free_ = 0;
  std::unordered_map<uint64_t, int32_t> cached_;  // key → block
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
  bool record_events_ = false;
  std::vector<kv_events::KvCacheEvent> events_;
};

}  // namespace tern
