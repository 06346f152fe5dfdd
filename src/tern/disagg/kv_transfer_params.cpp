// kv_transfer_params as JSON, both ways; the names follow vLLM's NixlConnector so a router
// written for vLLM reads tern's answer, plus tern's lease (id and expiry).
#include "tern/disagg/kv_transfer_params.h"

#include <limits>

#include "tern/core/error.h"

namespace tern::disagg {
namespace {

using nlohmann::json;

constexpr size_t kMaxBlockIds = size_t{1} << 22;

const json& require(const json& v, const char* key) {
  const auto it = v.find(key);
  if (it == v.end() || it->is_null())
    throw Error(std::string("kv_transfer_params: do_remote_prefill needs '") + key + "'");
  return *it;
}

std::string string_of(const json& v, const char* key) {
  if (!v.is_string())
    throw Error(std::string("kv_transfer_params: '") + key + "' must be a string");
  return v.get<std::string>();
}

bool bool_of(const json& v, const std::string& key) {
  if (!v.is_boolean()) throw Error("kv_transfer_params: '" + key + "' must be true or false");
  return v.get<bool>();
}

}  // namespace

KvTransferParams parse_kv_transfer_params(const json& value) {
  if (!value.is_object()) throw Error("kv_transfer_params must be an object");
  KvTransferParams p;
  bool remote_prefill = false;
  for (const auto& [key, v] : value.items()) {
    if (key == "do_remote_decode") {
      p.do_remote_decode = !v.is_null() && bool_of(v, key);
    } else if (key == "do_remote_prefill") {
      remote_prefill = !v.is_null() && bool_of(v, key);
    } else if (key != "remote_engine_id" && key != "remote_host" && key != "remote_port" &&
               key != "remote_block_ids" && key != "remote_lease_id" &&
               key != "remote_lease_expires_at") {
      throw Error("kv_transfer_params: '" + key +
                  "' is not supported (tern knows do_remote_decode, do_remote_prefill, "
                  "remote_engine_id, remote_host, remote_port, remote_block_ids, "
                  "remote_lease_id, remote_lease_expires_at)");
    }
  }
  if (p.do_remote_decode && remote_prefill)
    throw Error("kv_transfer_params: do_remote_decode and do_remote_prefill exclude each other");
  if (!remote_prefill) {
    for (const char* key :
         {"remote_engine_id", "remote_host", "remote_port", "remote_block_ids", "remote_lease_id"})
      if (value.contains(key) && !value.at(key).is_null())
        throw Error(std::string("kv_transfer_params: '") + key +
                    "' belongs with do_remote_prefill: true");
    return p;
  }
  RemoteBlocks r;
  r.engine_id = string_of(require(value, "remote_engine_id"), "remote_engine_id");
  r.host = string_of(require(value, "remote_host"), "remote_host");
  if (r.host.empty()) throw Error("kv_transfer_params: 'remote_host' is empty");
  const json& port = require(value, "remote_port");
  if (!port.is_number_integer() || port.get<int64_t>() < 1 || port.get<int64_t>() > 65535)
    throw Error("kv_transfer_params: 'remote_port' must be an integer in [1, 65535]");
  r.port = static_cast<int>(port.get<int64_t>());
  r.lease_id = string_of(require(value, "remote_lease_id"), "remote_lease_id");
  if (r.lease_id.size() > 64)
    throw Error("kv_transfer_params: 'remote_lease_id' has more than 64 characters");
  const json& blocks = require(value, "remote_block_ids");
  if (!blocks.is_array() || blocks.size() > kMaxBlockIds)
    throw Error("kv_transfer_params: 'remote_block_ids' must be an array of block ids");
  // A one-token prompt has no KV to pull: no blocks and no lease.
  if (blocks.empty() != r.lease_id.empty())
    throw Error("kv_transfer_params: 'remote_lease_id' must be given with blocks, and only then");
  for (const json& b : blocks) {
    if (!b.is_number_integer() || b.get<int64_t>() < 0 ||
        b.get<int64_t>() > std::numeric_limits<int32_t>::max())
      throw Error("kv_transfer_params: 'remote_block_ids' holds something not a block id");
    r.block_ids.push_back(static_cast<int32_t>(b.get<int64_t>()));
  }
  if (const auto it = value.find("remote_lease_expires_at"); it != value.end() && !it->is_null()) {
    if (!it->is_number())
      throw Error("kv_transfer_params: 'remote_lease_expires_at' must be a number");
    r.lease_expires_at = it->get<double>();
  }
  p.remote_prefill = std::move(r);
  return p;
}

json kv_transfer_params_json(const RemoteBlocks& b) {
  return json{{"do_remote_prefill", true},       {"do_remote_decode", false},
              {"remote_engine_id", b.engine_id}, {"remote_host", b.host},
              {"remote_port", b.port},           {"remote_block_ids", b.block_ids},
              {"remote_lease_id", b.lease_id},   {"remote_lease_expires_at", b.lease_expires_at}};
}

}  // namespace tern::disagg
