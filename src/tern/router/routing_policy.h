// How tern router picks a backend of a pool for a request: round robin, least outstanding
// requests, or prefix-aware (sgl-router's cache-aware policy: the backend that most likely holds
// the prompt's prefix in its KV cache, unless the load is too uneven).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/router/prompt_prefix_index.h"

namespace tern::router {

// A healthy backend the policy may pick: its index in the pool and its requests in flight.
struct Candidate {
  size_t backend = 0;
  int64_t in_flight = 0;
};

struct PrefixAwareOptions {
  size_t chunk_chars = 64;  // about one 16-token KV block of English text
  // The known prefix must cover at least this fraction of the prompt (sgl-router's default).
  double cache_threshold = 0.3;
  // The load is too uneven, and the least loaded backend is taken whatever the caches hold, when
  // max - min in-flight requests exceeds the absolute threshold and max > relative * min.
  int64_t balance_abs_threshold = 64;
  double balance_rel_threshold = 1.5;
  size_t max_entries_per_backend = size_t{1} << 18;  // chunk hashes (≈ 24 bytes each + list node)
};

// The pool calls a policy under its own lock: policies need no locking of their own.
class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  // The position in `candidates` (non-empty, ordered by backend index) of the one to use for a
  // request whose prompt is `prompt` (its text or rendered messages; may be empty).
  virtual size_t pick(std::span<const Candidate> candidates, std::string_view prompt) = 0;
  // The backend left the pool (unhealthy): whatever it held may be gone when it comes back.
  virtual void forget(size_t backend) { (void)backend; }
};

// "round_robin", "least_outstanding" or "prefix_aware"; throws tern::Error naming other names.
std::unique_ptr<RoutingPolicy> make_policy(const std::string& name, size_t num_backends,
                                           const PrefixAwareOptions& prefix_options = {});

inline constexpr const char* kPolicyNames = "round_robin, least_outstanding, prefix_aware";

}  // namespace tern::router
