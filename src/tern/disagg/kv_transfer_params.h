// A request's kv_transfer_params, in vLLM's NixlConnector names: what the router asks of a
// prefill instance (do_remote_decode: prefill, then hold the blocks for a decode instance),
// what that instance answers (where the blocks are and under which lease), and what the router
// hands the decode instance (do_remote_prefill: pull them from there).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tern::disagg {

// Where a prefill instance holds a prompt's KV.
struct RemoteBlocks {
  std::string engine_id;
  std::string host;
  int port = 0;
  std::string lease_id;
  std::vector<int32_t> block_ids;  // the producer's blocks of the prompt, in order
  double lease_expires_at = 0;     // Unix seconds (for the router's information)
};

struct KvTransferParams {
  bool do_remote_decode = false;               // to a prefill instance
  std::optional<RemoteBlocks> remote_prefill;  // to a decode instance (do_remote_prefill)

  bool empty() const { return !do_remote_decode && !remote_prefill; }
};

// The request field (an object). Unknown keys, wrong types, both directions at once, or
// do_remote_prefill without every remote_* field are a tern::Error naming the key.
KvTransferParams parse_kv_transfer_params(const nlohmann::json& value);

// What a prefill instance answers: the params a decode instance takes as they are.
nlohmann::json kv_transfer_params_json(const RemoteBlocks& blocks);

}  // namespace tern::disagg
