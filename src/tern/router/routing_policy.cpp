// The three routing policies (see routing_policy.h).
#include "tern/router/routing_policy.h"

#include <algorithm>

#include "tern/core/error.h"

namespace tern::router {
namespace {

// A cursor over backend indices: the next pick is the first allowed candidate at or after it,
// wrapping around, so the rotation stays in order while backends leave and return.
class Rotation {
 public:
  template <typename Allowed>
  size_t next(std::span<const Candidate> candidates, Allowed allowed) {
    size_t first = candidates.size(), after = candidates.size();
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!allowed(candidates[i])) continue;
      if (first == candidates.size()) first = i;
      if (candidates[i].backend >= cursor_) {
        after = i;
        break;
      }
    }
    const size_t chosen = after < candidates.size() ? after : first;
    cursor_ = candidates[chosen].backend + 1;
    return chosen;
  }

 private:
  size_t cursor_ = 0;
};

class RoundRobin : public RoutingPolicy {
 public:
  size_t pick(std::span<const Candidate> candidates, std::string_view) override {
    return rotation_.next(candidates, [](const Candidate&) { return true; });
  }

 private:
  Rotation rotation_;
};

int64_t min_load(std::span<const Candidate> candidates) {
  int64_t m = candidates[0].in_flight;
  for (const Candidate& c : candidates) m = std::min(m, c.in_flight);
  return m;
}

class LeastOutstanding : public RoutingPolicy {
 public:
  size_t pick(std::span<const Candidate> candidates, std::string_view) override {
    return least_loaded(candidates, rotation_);
  }
  static size_t least_loaded(std::span<const Candidate> candidates, Rotation& rotation) {
    const int64_t least = min_load(candidates);
    return rotation.next(candidates, [least](const Candidate& c) { return c.in_flight == least; });
  }

 private:
  Rotation rotation_;
};

class PrefixAware : public RoutingPolicy {
 public:
  PrefixAware(size_t num_backends, const PrefixAwareOptions& options) : options_(options) {
    for (size_t i = 0; i < num_backends; ++i)
      indexes_.emplace_back(options.max_entries_per_backend);
  }

  size_t pick(std::span<const Candidate> candidates, std::string_view prompt) override {
    const std::vector<uint64_t> chain = prefix_chain(prompt, options_.chunk_chars);
    const size_t chosen = choose(candidates, prompt, chain);
    indexes_.at(candidates[chosen].backend).insert(chain);
    return chosen;
  }

  void forget(size_t backend) override { indexes_.at(backend).clear(); }

 private:
  size_t choose(std::span<const Candidate> candidates, std::string_view prompt,
                const std::vector<uint64_t>& chain) {
    const int64_t least = min_load(candidates);
    int64_t most = least;
    for (const Candidate& c : candidates) most = std::max(most, c.in_flight);
    const bool imbalanced =
        most - least > options_.balance_abs_threshold &&
        static_cast<double>(most) > options_.balance_rel_threshold * static_cast<double>(least);
    if (imbalanced || chain.empty()) return LeastOutstanding::least_loaded(candidates, rotation_);

    // The longest known prefix; among equal ones the least loaded (then the first).
    size_t best = 0, best_chunks = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const size_t n = indexes_.at(candidates[i].backend).matched_chunks(chain);
      if (n > best_chunks ||
          (n == best_chunks && candidates[i].in_flight < candidates[best].in_flight)) {
        best = i;
        best_chunks = n;
      }
    }
    const double matched = static_cast<double>(best_chunks * options_.chunk_chars) /
                           static_cast<double>(prompt.size());
    if (best_chunks > 0 && matched >= options_.cache_threshold) return best;
    return LeastOutstanding::least_loaded(candidates, rotation_);
  }

  PrefixAwareOptions options_;
  std::vector<PromptPrefixIndex> indexes_;  // per backend of the pool
  Rotation rotation_;
};

}  // namespace

std::unique_ptr<RoutingPolicy> make_policy(const std::string& name, size_t num_backends,
                                           const PrefixAwareOptions& prefix_options) {
  if (name == "round_robin") return std::make_unique<RoundRobin>();
  if (name == "least_outstanding") return std::make_unique<LeastOutstanding>();
  if (name == "prefix_aware") {
    if (prefix_options.chunk_chars == 0)
      throw Error("prefix_aware: the chunk size must be at least 1");
    return std::make_unique<PrefixAware>(num_backends, prefix_options);
  }
  throw Error("unknown routing policy '" + name + "' (use " + kPolicyNames + ")");
}

}  // namespace tern::router
