// Prefix chains and their LRU set (see prompt_prefix_index.h).
#include "tern/router/prompt_prefix_index.h"

#include <xxhash.h>

namespace tern::router {

std::vector<uint64_t> prefix_chain(std::string_view prompt, size_t chunk_chars) {
  std::vector<uint64_t> chain;
  if (chunk_chars == 0) return chain;
  chain.reserve(prompt.size() / chunk_chars);
  uint64_t h = 0;
  for (size_t at = 0; at + chunk_chars <= prompt.size(); at += chunk_chars) {
    h = XXH3_64bits_withSeed(prompt.data() + at, chunk_chars, h);
    chain.push_back(h);
  }
  return chain;
}

PromptPrefixIndex::PromptPrefixIndex(size_t capacity) : capacity_(capacity) {}

size_t PromptPrefixIndex::matched_chunks(std::span<const uint64_t> chain) const {
  size_t n = 0;
  while (n < chain.size() && entries_.count(chain[n]) != 0) ++n;
  return n;
}

void PromptPrefixIndex::insert(std::span<const uint64_t> chain) {
  // Longest prefix first, so that the shorter prefixes end up the most recent: eviction then
  // cuts chains from their ends, and a prefix shared by many prompts is the last to go.
  for (size_t i = chain.size(); i-- > 0;) {
    if (auto it = entries_.find(chain[i]); it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      continue;
    }
    lru_.push_front(chain[i]);
    entries_.emplace(chain[i], lru_.begin());
  }
  while (entries_.size() > capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
}

void PromptPrefixIndex::clear() {
  lru_.clear();
  entries_.clear();
}

}  // namespace tern::router
