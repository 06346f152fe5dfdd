// The vocabulary of one KV pull, shared by the producer's server and the consumer's client: what
// the consumer asks for, what the producer's handler grants, and what the consumer gets back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace tern::disagg {

struct PullRequest {
  std::string lease_id;            // as the producer handed it out (opaque, ≤ 64 bytes)
  std::vector<int32_t> block_ids;  // the producer's block ids to send, in this order
};

// Producer side: what the handler grants for a valid request.
struct PullGrant {
  // blocks[i]: the byte ranges of block_ids[i], in order (views into the KV cache; they stay
  // valid until on_done runs). Per layer: K codes, V codes, and for 8-bit dtypes K and V scales.
  std::vector<std::vector<std::span<const std::byte>>> blocks;
  // Called once, on the server's thread, after the data were sent (true) or the send failed /
  // the peer died / the server shut down (false). May be empty.
  std::function<void(bool sent)> on_done;
};

// Called on the server's thread for each pull whose fingerprint matched; returns the grant, or
// an error message the client receives (unknown/expired/used lease, bad block id…).
using PullHandler = std::function<std::variant<PullGrant, std::string>(const PullRequest&)>;

struct PullResult {
  bool ok = false;
  // When !ok, one of: cannot connect / connection lost before the reply / peer died
  // mid-transfer / refused by producer: <its message> / fingerprint mismatch (both values) /
  // range size mismatch / timed out; each names the producer's host:port.
  std::string error;
  uint64_t bytes = 0;  // block bytes received
  double seconds = 0;  // wall time of the pull, connection included
};

}  // namespace tern::disagg
