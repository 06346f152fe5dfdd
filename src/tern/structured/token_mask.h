// From bytes to tokens: the vocabulary's byte strings in a trie (built once per tokenizer and
// shared), a compiled constraint (automaton + trie + per-state mask cache, shared by every
// sequence with the same constraint), and one sequence's place in it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "tern/structured/automaton.h"

namespace tern::structured {

class TokenTrie {
 public:
  // token_bytes[id]: the bytes a token stands for; empty: never allowed by a grammar (special
  // and control tokens). end_ids: allowed exactly where the grammar accepts.
  TokenTrie(const std::vector<std::string>& token_bytes, std::vector<int32_t> end_ids);

  int32_t vocab_size() const { return vocab_size_; }
  const std::vector<int32_t>& end_ids() const { return end_ids_; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  size_t num_nodes() const { return nodes_.size(); }

  struct Node {
    int32_t end;     // one past the last node of this subtree (nodes are in preorder)
    int32_t token;   // first token ending here, or -1; more in same_bytes_
    uint16_t depth;  // 1-based
    uint8_t byte;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  int32_t next_same(int32_t token) const { return same_bytes_[static_cast<size_t>(token)]; }
  size_t max_depth() const { return max_depth_; }

 private:
  int32_t vocab_size_;
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_ids_;
  std::vector<Node> nodes_;
  std::vector<int32_t> same_bytes_;  // [vocab]: the next token with the same bytes, or -1
  size_t max_depth_ = 0;
};

// A grammar over a vocabulary. Thread-safe: sequences sampling in parallel share it.
class CompiledConstraint {
 public:
  static constexpr size_t kMaxCachedMasks = 1024;

  CompiledConstraint(FlatGrammar grammar, std::shared_ptr<const TokenTrie> trie);

  int32_t start() const { return 0; }
  size_t mask_words() const { return (static_cast<size_t>(trie_->vocab_size()) + 63) / 64; }
  // The tokens allowed after `state`, as bits of `out` ([mask_words()]). In a dead or finished
  // state only the end ids are allowed, so a sequence always has a way to end.
  void fill_mask(int32_t state, std::span<uint64_t> out);
  // The state after `token`; an end id keeps the state; a token the grammar refuses: kDead.
  int32_t advance(int32_t state, int32_t token);
  bool accepting(int32_t state);
  bool finished(int32_t state);  // accepting and nothing may follow
  const TokenTrie& trie() const { return *trie_; }
  size_t num_states();

 private:
  void compute_mask(int32_t state, std::span<uint64_t> out);

  std::mutex mutex_;
  Automaton automaton_;
  std::shared_ptr<const TokenTrie> trie_;
  std::unordered_map<int32_t, std::vector<uint64_t>> masks_;
  std::vector<int32_t> walk_;  // [trie depth + 1]: the state at each depth of the walk
};

// One sequence's progress through its constraint: the state after each accepted token, so
// speculative drafts can be taken back in order. With wait_for >= 0 the constraint sleeps
// (masks nothing, never finishes) until that token is advanced, and applies from the next one
// (a reasoning model's end of thinking).
class ConstraintState {
 public:
  ConstraintState(std::shared_ptr<CompiledConstraint> constraint, size_t max_tokens,
                  int32_t wait_for = -1);

  // Sets the logits of disallowed tokens to -inf. logits: [row], the model's vocabulary (ids
  // past the tokenizer's are never allowed). No allocation after the first call.
  void apply(std::span<float> logits);
  void advance(int32_t token);
  void rollback();  // takes back the latest advance()
  bool finished() const;
  // Finished after the first `num_tokens` advances (a verify advances past tokens the engine
  // has not appended yet).
  bool finished_after(size_t num_tokens) const;
  bool accepting() const;
  int32_t state() const { return states_.back(); }  // kWaiting while asleep
  static constexpr int32_t kWaiting = -2;

 private:
  std::shared_ptr<CompiledConstraint> constraint_;
  int32_t wait_for_;
  std::vector<int32_t> states_;
  std::vector<uint64_t> mask_;
};

}  // namespace tern::structured
