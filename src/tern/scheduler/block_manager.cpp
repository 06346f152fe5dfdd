// BlockManager: reference counts, the LRU free list (intrusive, so a prefix hit on a free
// block unlinks it in O(1)) and the key → block map of the prefix cache.
#include "tern/scheduler/block_manager.h"

#include <xxhash.h>

#include <algorithm>
#include <string>

#include "tern/core/error.h"

namespace tern {

BlockManager::BlockManager(int64_t num_blocks, int block_size, bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching) {
  if (num_blocks < 1 || num_blocks > INT32_MAX)
    throw Error("the KV cache needs at least one block, got " + std::to_string(num_blocks));
  if (block_size < 1) throw Error("block size must be >= 1, got " + std::to_string(block_size));
  blocks_.resize(static_cast<size_t>(num_blocks));
  for (int32_t b = 0; b < static_cast<int32_t>(num_blocks); ++b) push_free(b, false);
}

uint64_t BlockManager::block_key(uint64_t parent, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

uint64_t BlockManager::key_of(Sequence& seq, int64_t index) {
  while (static_cast<int64_t>(seq.block_keys.size()) <= index) {
    const size_t j = seq.block_keys.size();
    const uint64_t parent = j == 0 ? kRootKey : seq.block_keys[j - 1];
    const auto tokens =
        std::span<const int32_t>(seq.token_ids)
            .subspan(j * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_));
    seq.block_keys.push_back(block_key(parent, tokens));
  }
  return seq.block_keys[static_cast<size_t>(index)];
}

std::vector<int32_t> BlockManager::find_cached_prefix(Sequence& seq) {
  std::vector<int32_t> hit;
  if (!prefix_caching_ || !seq.block_table.empty() || seq.num_tokens() == 0) return hit;
  const int64_t max_blocks = (seq.num_tokens() - 1) / block_size_;
  for (int64_t i = 0; i < max_blocks; ++i) {
    const uint64_t key = key_of(seq, i);
    const auto it = cached_.find(key);
    if (it == cached_.end()) break;
    const Block& block = blocks_[static_cast<size_t>(it->second)];
    const uint64_t parent = i == 0 ? kRootKey : seq.block_keys[static_cast<size_t>(i - 1)];
    const auto tokens =
        std::span<const int32_t>(seq.token_ids)
            .subspan(static_cast<size_t>(i * block_size_), static_cast<size_t>(block_size_));
    if (block.parent_key != parent ||
        !std::equal(tokens.begin(), tokens.end(), block.tokens.begin()))
      break;  // a hash collision: recompute rather than trust the key
    hit.push_back(it->second);
  }
  return hit;
}

bool BlockManager::allocate(Sequence& seq, int64_t num_tokens, std::vector<BlockCopy>& copies,
                            std::span<const int32_t> cached_prefix) {
  const bool from_cache = !cached_prefix.empty();
  if (from_cache && !seq.block_table.empty())
    throw Error("internal: a cached prefix for a sequence that already holds blocks");
  const int64_t held = from_cache ? static_cast<int64_t>(cached_prefix.size())
                                  : static_cast<int64_t>(seq.block_table.size());
  const int64_t computed = from_cache ? held * block_size_ : seq.num_computed_tokens;
  const int64_t fresh = std::max<int64_t>(0, blocks_for(num_tokens) - held);
  int64_t revived = 0;  // cached blocks that leave the free list
  for (int32_t b : cached_prefix) revived += blocks_[static_cast<size_t>(b)].ref_count == 0;
  // The step writes token `computed` next; into a block others share, it needs its own copy.
  const int64_t write_block = computed / block_size_;
  const bool copy_on_write = !from_cache && num_tokens > computed && computed % block_size_ != 0 &&
                             write_block < held &&
                             ref_count(seq.block_table[static_cast<size_t>(write_block)]) > 1;
  if (fresh + revived + (copy_on_write ? 1 : 0) > num_free_) return false;

  for (int32_t b : cached_prefix) {
    Block& block = blocks_[static_cast<size_t>(b)];
    if (block.ref_count++ == 0) unlink_free(b);
    seq.block_table.push_back(b);
  }
  if (from_cache) {
    seq.num_computed_tokens = computed;
    int64_t with_draft = 0;
    while (
        with_draft < held &&
        blocks_[static_cast<size_t>(cached_prefix[static_cast<size_t>(with_draft)])].has_draft_kv)
      ++with_draft;
    seq.draft_kv = {with_draft * block_size_, with_draft};
  }
  if (copy_on_write) {
    int32_t& slot = seq.block_table[static_cast<size_t>(write_block)];
    const int32_t copy = pop_free_block();
    blocks_[static_cast<size_t>(slot)].ref_count--;  // others still hold it
    copies.push_back({slot, copy});
    slot = copy;
  }
  for (int64_t i = 0; i < fresh; ++i) seq.block_table.push_back(pop_free_block());
  return true;
}

void BlockManager::cache_full_blocks(Sequence& seq) {
  if (!prefix_caching_) return;
  const int64_t full = std::min<int64_t>(seq.num_computed_tokens / block_size_,
                                         static_cast<int64_t>(seq.block_table.size()));
  kv_events::BlockStored* stored = nullptr;  // the event of this call, once a block is stored
  for (int64_t i = seq.num_keyed_blocks; i < full; ++i) {
    const int32_t b = seq.block_table[static_cast<size_t>(i)];
    Block& block = blocks_[static_cast<size_t>(b)];
    if (block.has_key) continue;  // it came from the cache
    const uint64_t key = key_of(seq, i);
    if (cached_.count(key)) continue;  // the same tokens already sit in another block
    block.has_key = true;
    block.key = key;
    block.parent_key = i == 0 ? kRootKey : seq.block_keys[static_cast<size_t>(i - 1)];
    block.tokens.assign(seq.token_ids.begin() + i * block_size_,
                        seq.token_ids.begin() + (i + 1) * block_size_);
    cached_.emplace(key, b);
    if (!record_events_) continue;
    // One event holds a chain: a block whose parent is not the event's last starts another.
    if (!stored || stored->block_hashes.back() != block.parent_key) {
      kv_events::BlockStored next;
      if (i > 0) next.parent_block_hash = block.parent_key;
      next.block_size = block_size_;
      stored = &std::get<kv_events::BlockStored>(events_.emplace_back(std::move(next)));
    }
    stored->block_hashes.push_back(key);
    stored->token_ids.insert(stored->token_ids.end(), block.tokens.begin(), block.tokens.end());
  }
  seq.num_keyed_blocks = std::max(seq.num_keyed_blocks, full);
}

bool BlockManager::reset_prefix_cache() {
  if (num_free_ != num_blocks()) return false;
  for (Block& block : blocks_) {
    block.has_key = false;
    block.tokens.clear();
    block.has_draft_kv = false;
  }
  cached_.clear();
  if (record_events_) events_.emplace_back(kv_events::AllBlocksCleared{});
  return true;
}

std::vector<BlockManager::CachedBlock> BlockManager::cached_blocks() const {
  std::vector<CachedBlock> out;
  for (const auto& [key, b] : cached_) {
    const Block& block = blocks_[static_cast<size_t>(b)];
    out.push_back({key, block.parent_key, block.tokens});
  }
  return out;
}

void BlockManager::trim_to_computed(Sequence& seq) {
  const size_t keep = static_cast<size_t>(blocks_for(seq.num_computed_tokens));
  while (seq.block_table.size() > keep) {
    const int32_t b = seq.block_table.back();
    seq.block_table.pop_back();
    release(b, !blocks_[static_cast<size_t>(b)].has_key);
  }
}

void BlockManager::mark_draft_computed(Sequence& seq) {
  const int64_t full = std::min<int64_t>(
      std::min(seq.draft_kv.num_computed_tokens, seq.num_computed_tokens) / block_size_,
      static_cast<int64_t>(seq.block_table.size()));
  for (int64_t i = seq.draft_kv.num_marked_blocks; i < full; ++i)
    blocks_[static_cast<size_t>(seq.block_table[static_cast<size_t>(i)])].has_draft_kv = true;
  seq.draft_kv.num_marked_blocks = std::max(seq.draft_kv.num_marked_blocks, full);
}

void BlockManager::free(Sequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    // Blocks without a key hold nothing anyone can find again: reuse them first.
    release(*it, !blocks_[static_cast<size_t>(*it)].has_key);
  }
  seq.block_table.clear();
  seq.num_computed_tokens = 0;
  seq.num_keyed_blocks = 0;
  seq.draft_token_ids.clear();
  seq.draft_kv = {};
}

void BlockManager::fork(const Sequence& parent, Sequence& child) {
  child.token_ids = parent.token_ids;
  child.num_prompt_tokens = parent.num_prompt_tokens;
  child.num_computed_tokens = parent.num_computed_tokens;
  child.block_table = parent.block_table;
  child.block_keys = parent.block_keys;
  child.num_keyed_blocks = parent.num_keyed_blocks;
  child.num_cached_tokens = parent.num_cached_tokens;
  child.draft_kv = parent.draft_kv;
  for (int32_t b : child.block_table) blocks_[static_cast<size_t>(b)].ref_count++;
}

int32_t BlockManager::pop_free_block() {
  const int32_t b = free_head_;
  unlink_free(b);
  Block& block = blocks_[static_cast<size_t>(b)];
  if (block.has_key) {  // evicted from the prefix cache
    const auto it = cached_.find(block.key);
    if (it != cached_.end() && it->second == b) {
      cached_.erase(it);
      if (record_events_) {
        auto* removed =
            events_.empty() ? nullptr : std::get_if<kv_events::BlockRemoved>(&events_.back());
        if (!removed)
          removed =
              &std::get<kv_events::BlockRemoved>(events_.emplace_back(kv_events::BlockRemoved{}));
        removed->block_hashes.push_back(block.key);
      }
    }
    block.has_key = false;
    block.tokens.clear();
  }
  block.has_draft_kv = false;
  block.ref_count = 1;
  return b;
}

void BlockManager::release(int32_t b, bool to_front) {
  Block& block = blocks_[static_cast<size_t>(b)];
  if (block.ref_count <= 0) throw Error("internal: block " + std::to_string(b) + " released twice");
  if (--block.ref_count == 0) push_free(b, to_front);
}

void BlockManager::push_free(int32_t b, bool to_front) {
  Block& block = blocks_[static_cast<size_t>(b)];
  block.in_free_list = true;
  if (to_front) {
    block.prev = -1;
    block.next = free_head_;
    if (free_head_ >= 0) blocks_[static_cast<size_t>(free_head_)].prev = b;
    free_head_ = b;
    if (free_tail_ < 0) free_tail_ = b;
  } else {
    block.next = -1;
    block.prev = free_tail_;
    if (free_tail_ >= 0) blocks_[static_cast<size_t>(free_tail_)].next = b;
    free_tail_ = b;
    if (free_head_ < 0) free_head_ = b;
  }
  ++num_free_;
}

void BlockManager::unlink_free(int32_t b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  if (!block.in_free_list) throw Error("internal: block " + std::to_string(b) + " is not free");
  (block.prev >= 0 ? blocks_[static_cast<size_t>(block.prev)].next : free_head_) = block.next;
  (block.next >= 0 ? blocks_[static_cast<size_t>(block.next)].prev : free_tail_) = block.prev;
  block.prev = block.next = -1;
  block.in_free_list = false;
  --num_free_;
}

}  // namespace tern
