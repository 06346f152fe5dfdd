// The mask walk: preorder over the trie with the automaton state at each depth, skipping a
// whole subtree at the first byte the grammar refuses, so shared prefixes are matched once.
#include "tern/structured/token_mask.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace tern::structured {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes, std::vector<int32_t> end_ids)
    : vocab_size_(static_cast<int32_t>(token_bytes.size())),
      bytes_(token_bytes),
      end_ids_(std::move(end_ids)),
      same_bytes_(token_bytes.size(), -1) {
  std::vector<int32_t> order;
  for (size_t i = 0; i < bytes_.size(); ++i)
    if (!bytes_[i].empty() && bytes_[i].size() < 65535) order.push_back(static_cast<int32_t>(i));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)] ||
           (bytes_[static_cast<size_t>(a)] == bytes_[static_cast<size_t>(b)] && a < b);
  });
  std::vector<int32_t> path;  // node index at each depth
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = bytes_[static_cast<size_t>(id)];
    size_t common = 0;
    if (prev) {
      const size_t n = std::min(prev->size(), s.size());
      while (common < n && (*prev)[common] == s[common]) ++common;
    }
    while (path.size() > common) {
      nodes_[static_cast<size_t>(path.back())].end = static_cast<int32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<int32_t>(nodes_.size()));
      nodes_.push_back({0, -1, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d])});
    }
    Node& last = nodes_[static_cast<size_t>(path.back())];
    if (last.token < 0) {
      last.token = id;
    } else {
      int32_t t = last.token;
      while (same_bytes_[static_cast<size_t>(t)] >= 0) t = same_bytes_[static_cast<size_t>(t)];
      same_bytes_[static_cast<size_t>(t)] = id;
    }
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
  }
  while (!path.empty()) {
    nodes_[static_cast<size_t>(path.back())].end = static_cast<int32_t>(nodes_.size());
    path.pop_back();
  }
}

CompiledConstraint::CompiledConstraint(FlatGrammar grammar, std::shared_ptr<const TokenTrie> trie)
    : automaton_(std::move(grammar)), trie_(std::move(trie)), walk_(trie_->max_depth() + 1) {}

void CompiledConstraint::compute_mask(int32_t state, std::span<uint64_t> out) {
  std::fill(out.begin(), out.end(), 0);
  auto set = [&](int32_t id) { out[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); };
  if (automaton_.accepting(state) || !automaton_.can_continue(state))
    for (int32_t id : trie_->end_ids())
      if (id >= 0 && id < trie_->vocab_size()) set(id);
  if (!automaton_.can_continue(state)) return;
  const std::vector<TokenTrie::Node>& nodes = trie_->nodes();
  walk_[0] = state;
  for (size_t i = 0; i < nodes.size();) {
    const TokenTrie::Node& n = nodes[i];
    const int32_t s = automaton_.next(walk_[n.depth - 1u], n.byte);
    if (s < 0) {
      i = static_cast<size_t>(n.end);
      continue;
    }
    walk_[n.depth] = s;
    for (int32_t t = n.token; t >= 0; t = trie_->next_same(t)) set(t);
    ++i;
  }
}

void CompiledConstraint::fill_mask(int32_t state, std::span<uint64_t> out) {
  std::lock_guard lock(mutex_);
  if (auto it = masks_.find(state); it != masks_.end()) {
    std::copy(it->second.begin(), it->second.end(), out.begin());
    return;
  }
  compute_mask(state, out);
  if (state < 0) return;
  if (masks_.size() >= kMaxCachedMasks) masks_.clear();
  masks_.emplace(state, std::vector<uint64_t>(out.begin(), out.end()));
}

int32_t CompiledConstraint::advance(int32_t state, int32_t token) {
  std::lock_guard lock(mutex_);
  const auto& ends = trie_->end_ids();
  if (std::find(ends.begin(), ends.end(), token) != ends.end()) return state;
  if (token < 0 || token >= trie_->vocab_size()) return Automaton::kDead;
  const std::string& b = trie_->bytes(token);
  if (b.empty()) return Automaton::kDead;
  for (unsigned char c : b) state = automaton_.next(state, c);
  return state;
}

bool CompiledConstraint::accepting(int32_t state) {
  std::lock_guard lock(mutex_);
  return automaton_.accepting(state);
}

bool CompiledConstraint::finished(int32_t state) {
  std::lock_guard lock(mutex_);
  return automaton_.accepting(state) && !automaton_.can_continue(state);
}

size_t CompiledConstraint::num_states() {
  std::lock_guard lock(mutex_);
  return automaton_.num_states();
}

ConstraintState::ConstraintState(std::shared_ptr<CompiledConstraint> constraint, size_t max_tokens,
                                 int32_t wait_for)
    : constraint_(std::move(constraint)), wait_for_(wait_for), mask_(constraint_->mask_words()) {
  states_.reserve(max_tokens + 64);
  states_.push_back(wait_for_ >= 0 ? kWaiting : constraint_->start());
}

void ConstraintState::apply(std::span<float> logits) {
  if (states_.back() == kWaiting) return;
  constraint_->fill_mask(states_.back(), mask_);
  const size_t vocab = static_cast<size_t>(constraint_->trie().vocab_size());
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(vocab, logits.size());
  // A word at a time: all allowed (most of a JSON string's row) or all refused (most of the
  // rest) without looking at its bits.
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t bits = mask_[w];
    const size_t begin = w * 64, end = std::min(n, begin + 64);
    if (bits == ~uint64_t{0} && end - begin == 64) continue;
    if (bits == 0) {
      std::fill(logits.begin() + static_cast<std::ptrdiff_t>(begin),
                logits.begin() + static_cast<std::ptrdiff_t>(end), kNegInf);
      continue;
    }
    for (size_t i = begin; i < end; ++i)
      if (!((bits >> (i - begin)) & 1)) logits[i] = kNegInf;
  }
  std::fill(logits.begin() + static_cast<std::ptrdiff_t>(n), logits.end(), kNegInf);
}

void ConstraintState::advance(int32_t token) {
  const int32_t now = states_.back();
  if (now == kWaiting)
    states_.push_back(token == wait_for_ ? constraint_->start() : kWaiting);
  else
    states_.push_back(constraint_->advance(now, token));
}

void ConstraintState::rollback() {
  if (states_.size() > 1) states_.pop_back();
}

bool ConstraintState::finished() const {
  return states_.back() != kWaiting && constraint_->finished(states_.back());
}
bool ConstraintState::finished_after(size_t num_tokens) const {
  return num_tokens < states_.size() && states_[num_tokens] != kWaiting &&
         constraint_->finished(states_[num_tokens]);
}

bool ConstraintState::accepting() const {
  return states_.back() != kWaiting && constraint_->accepting(states_.back());
}

}  // namespace tern::structured
