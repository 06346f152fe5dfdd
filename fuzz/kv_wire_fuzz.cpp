// Fuzzes the KV transfer's frame parsers: any bytes give a frame or a tern::Error, never a crash
// or an allocation past the limits, and an accepted frame re-encodes to exactly the same bytes
// (the format is canonical, so a parser that accepts more than the encoder writes is a bug).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "tern/core/error.h"
#include "tern/disagg/kv_wire.h"

namespace {

bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  using namespace tern::disagg;
  try {
    const RequestFrame r = decode_request(bytes);
    if (r.block_ids.size() > kMaxBlocksPerPull || r.lease_id.size() > kMaxLeaseIdBytes ||
        r.fingerprint.size() > kMaxFingerprintBytes || !same(encode_request(r), bytes))
      __builtin_trap();
  } catch (const tern::Error&) {
  }
  try {
    const ReplyFrame r = decode_reply(bytes);
    if (r.layouts.size() > kMaxLayouts || r.block_layout.size() > kMaxBlocksPerPull)
      __builtin_trap();
    for (uint16_t k : r.block_layout)
      if (k >= r.layouts.size()) __builtin_trap();
    if (!same(encode_reply(r), bytes)) __builtin_trap();
  } catch (const tern::Error&) {
  }
  try {
    const BlockHeader h = decode_block_header(bytes);
    std::byte out[kBlockHeaderBytes];
    encode_block_header(h, out);
    if (!same(out, bytes)) __builtin_trap();
  } catch (const tern::Error&) {
  }
  return 0;
}
