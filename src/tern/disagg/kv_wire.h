// The KV transfer's control frames on the wire: a consumer's pull request, the producer's reply
// and the small header of each block's data message. Pure bytes in and out (no UCX), so the
// parser can be fuzzed; every count and length is checked against hard limits and the exact
// frame size, and a bad frame throws tern::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tern::disagg {

// Active message ids (UCX AM ids of this protocol).
inline constexpr unsigned kAmPullRequest = 0x7e01;  // consumer → producer: RequestFrame
inline constexpr unsigned kAmPullReply = 0x7e02;    // producer → consumer: ReplyFrame
inline constexpr unsigned kAmBlockData =
    0x7e03;  // producer → consumer: header BlockHeader, data = one block's ranges
// consumer → producer: header BlockHeader (block_index unused), no data. The consumer gave up on
// the pull and is closing the connection; said explicitly because over shared memory a live
// process's closed endpoint is not noticed by its peer.
inline constexpr unsigned kAmPullCancel = 0x7e04;

inline constexpr uint32_t kWireMagic = 0x52564b54;  // "TKVR" little-endian
inline constexpr uint16_t kWireVersion = 1;

// Hard limits: a frame that claims more is refused before anything is allocated for it.
inline constexpr size_t kMaxFingerprintBytes = 256;
inline constexpr size_t kMaxLeaseIdBytes = 64;
inline constexpr size_t kMaxErrorBytes = 1024;
inline constexpr size_t kMaxBlocksPerPull = 65536;
inline constexpr size_t kMaxRangesPerBlock = 4096;
// Distinct range-size lists in one reply: every block of a KV cache has the same list, so one
// layout is the normal case; a few allow for mixed caches.
inline constexpr size_t kMaxLayouts = 64;

enum class ReplyStatus : uint8_t {
  kOk = 0,
  kRefused = 1,  // the producer's handler said no (lease unknown/expired/used, block id…)
  kFingerprintMismatch = 2,  // message holds the producer's fingerprint
  kBadRequest = 3,  // the producer could not serve a well-formed request (too many layouts…)
};

struct RequestFrame {
  uint64_t pull_id = 0;  // chosen by the consumer, echoed in the reply and every block header
  std::string fingerprint;
  std::string lease_id;
  std::vector<int32_t> block_ids;
};

struct ReplyFrame {
  uint64_t pull_id = 0;
  ReplyStatus status = ReplyStatus::kOk;
  std::string message;  // !ok: the error text (kFingerprintMismatch: the producer's fingerprint)
  // ok: layouts[k] is a list of range sizes in bytes; block i's ranges are
  // layouts[block_layout[i]].
  std::vector<std::vector<uint64_t>> layouts;
  std::vector<uint16_t> block_layout;  // [num_blocks]
};

// The AM header of block `block_index`'s data message of pull `pull_id`.
struct BlockHeader {
  uint64_t pull_id = 0;
  uint32_t block_index = 0;
};
inline constexpr size_t kBlockHeaderBytes = 4 + 8 + 4;  // magic, pull_id, block_index

// Largest well-formed request: the server refuses a longer one without parsing it.
inline constexpr size_t kMaxRequestBytes =
    8 + 8 + 2 + kMaxFingerprintBytes + 2 + kMaxLeaseIdBytes + 4 + 4 * kMaxBlocksPerPull;

std::vector<std::byte> encode_request(const RequestFrame& frame);
RequestFrame decode_request(std::span<const std::byte> bytes);  // throws tern::Error

std::vector<std::byte> encode_reply(const ReplyFrame& frame);
ReplyFrame decode_reply(std::span<const std::byte> bytes);  // throws tern::Error

void encode_block_header(const BlockHeader& header, std::byte* out);  // writes kBlockHeaderBytes
BlockHeader decode_block_header(std::span<const std::byte> bytes);    // throws tern::Error

}  // namespace tern::disagg
