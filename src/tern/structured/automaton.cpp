// Stack expansion: a call pushes the callee's alternative and, unless the call is the last
// element of its alternative (a tail call), the position after it; so right recursion (every
// repetition) keeps stacks flat. flatten() refused left recursion, so expansion terminates.
#include "tern/structured/automaton.h"

#include <algorithm>

namespace tern::structured {
namespace {

using Kind = FlatGrammar::Element::Kind;
// Stacks deeper than this (a grammar nesting that deep) or sets larger than this are cut: the
// text is then refused rather than the engine running out of memory.
constexpr size_t kMaxStackDepth = 4096;
constexpr size_t kMaxStacks = 65536;

}  // namespace

Automaton::Automaton(FlatGrammar grammar) : g_(std::move(grammar)) {
  StackSet set;
  for (int32_t start : g_.alternatives.at(static_cast<size_t>(g_.root))) {
    Stack s{start};
    expand(s, set);
  }
  intern(std::move(set));  // state 0, possibly with no stacks (matches nothing)
}

void Automaton::expand(Stack& stack, StackSet& out) const {
  // Depth first over the callees' alternatives, in order, with the pending stacks in a vector
  // rather than on the call stack: a chain of tail calls (nested `?` and `{m,n}`) keeps a
  // stack flat however deep it goes, and recursing once per call overflowed the thread's stack.
  std::vector<Stack> pending;
  pending.push_back(std::move(stack));
  while (!pending.empty() && out.size() < kMaxStacks) {
    Stack s = std::move(pending.back());
    pending.pop_back();
    if (s.size() > kMaxStackDepth) continue;
    bool called = false;
    while (!s.empty()) {
      const int32_t p = s.back();
      const FlatGrammar::Element& e = g_.elements[static_cast<size_t>(p)];
      if (e.kind == Kind::kBytes) break;
      s.pop_back();
      if (e.kind == Kind::kEnd) continue;
      // A call: the alternatives pushed last first, so the first is expanded first.
      if (g_.elements[static_cast<size_t>(p + 1)].kind != Kind::kEnd) s.push_back(p + 1);
      const auto& alts = g_.alternatives[static_cast<size_t>(e.arg)];
      for (size_t i = alts.size(); i-- > 0;) {
        Stack t = s;
        t.push_back(alts[i]);
        pending.push_back(std::move(t));
      }
      called = true;
      break;
    }
    if (!called) out.push_back(std::move(s));
  }
}

int32_t Automaton::intern(StackSet set) {
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  if (set.empty() && !states_.empty()) return kDead;
  if (auto it = ids_.find(set); it != ids_.end()) return it->second;
  if (states_.size() >= kMaxStates) return kDead;
  uint8_t flags = 0;
  for (const Stack& s : set) flags |= s.empty() ? kAccepting : kContinues;
  const int32_t id = static_cast<int32_t>(states_.size());
  ids_.emplace(set, id);
  states_.push_back(std::move(set));
  std::array<int32_t, 256> row;
  row.fill(kUnknown);
  next_.push_back(row);
  flags_.push_back(flags);
  return id;
}

int32_t Automaton::next(int32_t state, uint8_t byte) {
  if (state < 0) return kDead;
  int32_t& cached = next_[static_cast<size_t>(state)][byte];
  if (cached != kUnknown) return cached;
  StackSet out;
  for (const Stack& s : states_[static_cast<size_t>(state)]) {
    if (s.empty()) continue;
    const FlatGrammar::Element& e = g_.elements[static_cast<size_t>(s.back())];
    if (!g_.byte_sets[static_cast<size_t>(e.arg)].test(byte)) continue;
    Stack t = s;
    t.back() += 1;
    expand(t, out);
  }
  const int32_t id = out.empty() ? kDead : intern(std::move(out));
  // intern may have grown next_: look the slot up again.
  next_[static_cast<size_t>(state)][byte] = id;
  return id;
}

bool Automaton::matches(std::string_view text) {
  int32_t s = start();
  for (unsigned char c : text) s = next(s, c);
  return accepting(s);
}

bool Automaton::accepts_prefix(std::string_view text) {
  int32_t s = start();
  for (unsigned char c : text) s = next(s, c);
  return s >= 0 && (accepting(s) || can_continue(s));
}

}  // namespace tern::structured
