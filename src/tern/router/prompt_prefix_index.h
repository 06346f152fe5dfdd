// What tern router remembers of the prompts it sent one backend, so that the prefix-aware policy
// can guess which backend's prefix cache holds a new prompt's start: hashed chains of fixed-size
// chunks of the prompt text, bounded in number, least recently used evicted first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tern::router {

// The prompt's whole chunks of `chunk_chars` bytes, each hashed together with the hash before it,
// so that chain[i] names the prompt's first (i + 1) * chunk_chars bytes: [prompt.size() /
// chunk_chars].
std::vector<uint64_t> prefix_chain(std::string_view prompt, size_t chunk_chars);

class PromptPrefixIndex {
 public:
  // `capacity`: the most chain entries kept (each names one chunk-sized prefix).
  explicit PromptPrefixIndex(size_t capacity);

  // How many leading entries of `chain` this backend was sent (the known prefix, in chunks).
  size_t matched_chunks(std::span<const uint64_t> chain) const;
  // Remembers a prompt sent to this backend; evicts the least recently used entries past capacity.
  void insert(std::span<const uint64_t> chain);
  void clear();
  size_t size() const { return entries_.size(); }

 private:
  size_t capacity_;
  std::list<uint64_t> lru_;  // most recently used first
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> entries_;
};

}  // namespace tern::router
