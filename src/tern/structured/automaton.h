// The byte-level matcher of a grammar: a state is a set of pushdown stacks (positions in the
// flat grammar; the top is the byte set to match next), advanced one byte at a time. States are
// interned and transitions memoized, so the automaton is a DFA built lazily as text reaches it,
// and a state can key a cached token mask. UTF-8 needs nothing special: classes are bytes.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "tern/structured/grammar.h"

namespace tern::structured {

class Automaton {
 public:
  static constexpr int32_t kDead = -1;
  // Beyond this many states next() answers kDead (a bound on memory: about 1 KiB a state).
  static constexpr size_t kMaxStates = 1 << 16;

  explicit Automaton(FlatGrammar grammar);

  int32_t start() const { return 0; }
  // Not thread-safe (it may add a state); never throws on a valid state.
  int32_t next(int32_t state, uint8_t byte);
  // The text so far is a whole sentence of the grammar.
  bool accepting(int32_t state) const {
    return state >= 0 && (flags_[static_cast<size_t>(state)] & kAccepting);
  }
  // Some continuation is possible (false: only the end may follow).
  bool can_continue(int32_t state) const {
    return state >= 0 && (flags_[static_cast<size_t>(state)] & kContinues);
  }
  size_t num_states() const { return states_.size(); }

  // Whole-text match, for tests and validation.
  bool matches(std::string_view text);
  // Whether `text` can be continued into a sentence (a prefix of one).
  bool accepts_prefix(std::string_view text);

 private:
  static constexpr uint8_t kAccepting = 1, kContinues = 2;
  static constexpr int32_t kUnknown = -2;
  using Stack = std::vector<int32_t>;  // positions; the top (back) is a byte set, or none: done
  using StackSet = std::vector<Stack>;

  void expand(Stack& stack, StackSet& out) const;
  int32_t intern(StackSet set);

  FlatGrammar g_;
  std::vector<StackSet> states_;
  std::vector<std::array<int32_t, 256>> next_;
  std::vector<uint8_t> flags_;
  std::map<StackSet, int32_t> ids_;
};

}  // namespace tern::structured
