// The KV transfer's frames: round trips, and every limit and length check refusing what breaks it.
#include "tern/disagg/kv_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "tern/core/error.h"

namespace tern::disagg {
namespace {

RequestFrame sample_request() {
  RequestFrame f;
  f.pull_id = 0x1122334455667788ULL;
  f.fingerprint = "qwen3-0.6b:q4_0:kv-f16:16x28";
  f.lease_id = "lease-42";
  f.block_ids = {7, 3, -1, 2147483647};
  return f;
}

ReplyFrame sample_reply() {
  ReplyFrame f;
  f.pull_id = 99;
  f.layouts = {{4096, 4096, 128, 128}, {8}};
  f.block_layout = {0, 1, 0};
  return f;
}

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KvWire, RequestRoundTrips) {
  const RequestFrame f = sample_request();
  const RequestFrame g = decode_request(encode_request(f));
  EXPECT_EQ(g.pull_id, f.pull_id);
  EXPECT_EQ(g.fingerprint, f.fingerprint);
  EXPECT_EQ(g.lease_id, f.lease_id);
  EXPECT_EQ(g.block_ids, f.block_ids);
}

TEST(KvWire, ReplyRoundTripsWithOneOrManyLayouts) {
  ReplyFrame f = sample_reply();
  ReplyFrame g = decode_reply(encode_reply(f));
  EXPECT_EQ(g.pull_id, 99u);
  EXPECT_EQ(g.status, ReplyStatus::kOk);
  EXPECT_EQ(g.layouts, f.layouts);
  EXPECT_EQ(g.block_layout, f.block_layout);
  // One layout: no per-block indices on the wire, all blocks use it.
  f.layouts = {{1, 2, 3}};
  f.block_layout = {0, 0, 0, 0};
  const auto one = encode_reply(f);
  g = decode_reply(one);
  EXPECT_EQ(g.block_layout, f.block_layout);
  EXPECT_EQ(one.size(), 8u + 8 + 1 + 2 + 4 + 3 * 8 + 4);
}

TEST(KvWire, ErrorReplyCarriesItsMessageCutToTheLimit) {
  ReplyFrame f;
  f.status = ReplyStatus::kRefused;
  f.message = "lease 'x' expired";
  EXPECT_EQ(decode_reply(encode_reply(f)).message, f.message);
  f.message = std::string(5000, 'e');
  EXPECT_EQ(decode_reply(encode_reply(f)).message.size(), kMaxErrorBytes);
}

TEST(KvWire, BlockHeaderRoundTripsAndNeedsItsExactLength) {
  std::byte out[kBlockHeaderBytes];
  encode_block_header(BlockHeader{12345, 77}, out);
  const BlockHeader h = decode_block_header(out);
  EXPECT_EQ(h.pull_id, 12345u);
  EXPECT_EQ(h.block_index, 77u);
  EXPECT_THROW(decode_block_header(std::span<const std::byte>(out, kBlockHeaderBytes - 1)), Error);
  out[0] = std::byte{0};
  EXPECT_THROW(decode_block_header(out), Error);
}

TEST(KvWire, EveryTruncationOfARequestIsRefused) {
  const auto bytes = encode_request(sample_request());
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(decode_request(std::span(bytes).first(n)), Error) << "prefix of " << n;
  auto longer = bytes;
  longer.push_back(std::byte{0});
  EXPECT_NE(message_of([&] { decode_request(longer); }).find("trailing"), std::string::npos);
}

TEST(KvWire, EveryTruncationOfAReplyIsRefused) {
  const auto bytes = encode_reply(sample_reply());
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(decode_reply(std::span(bytes).first(n)), Error) << "prefix of " << n;
}

TEST(KvWire, BadMagicVersionAndKindAreRefused) {
  auto bytes = encode_request(sample_request());
  auto bad = bytes;
  bad[0] = std::byte{'X'};
  EXPECT_NE(message_of([&] { decode_request(bad); }).find("magic"), std::string::npos);
  bad = bytes;
  bad[4] = std::byte{2};
  EXPECT_NE(message_of([&] { decode_request(bad); }).find("version 2"), std::string::npos);
  // A reply is not a request.
  EXPECT_NE(message_of([&] { decode_request(encode_reply(sample_reply())); }).find("kind"),
            std::string::npos);
}

// Offsets in a request: header 8, pull id 8, then u16 fingerprint length.
TEST(KvWire, OversizedCountsAreRefusedBeforeAllocating) {
  RequestFrame f = sample_request();
  auto bytes = encode_request(f);
  auto bad = bytes;
  bad[16] = std::byte{0xff};  // fingerprint length 0x..ff > 256
  bad[17] = std::byte{0xff};
  EXPECT_NE(message_of([&] { decode_request(bad); }).find("fingerprint of 65535"),
            std::string::npos);
  // Block count field: after fingerprint and lease id.
  const size_t count_at = 16 + 2 + f.fingerprint.size() + 2 + f.lease_id.size();
  bad = bytes;
  std::memset(&bad[count_at], 0xff, 4);
  EXPECT_NE(message_of([&] { decode_request(bad); }).find("4294967295 block ids"),
            std::string::npos);
  // A count within the limit but beyond the bytes there.
  bad = bytes;
  bad[count_at] = std::byte{100};
  EXPECT_NE(message_of([&] { decode_request(bad); }).find("truncated at block ids"),
            std::string::npos);
  // A frame longer than any valid request.
  std::vector<std::byte> huge(kMaxRequestBytes + 1);
  EXPECT_NE(message_of([&] { decode_request(huge); }).find("limit"), std::string::npos);
}

TEST(KvWire, ReplyLayoutIndexOutOfRangeIsRefused) {
  auto bytes = encode_reply(sample_reply());
  bytes[bytes.size() - 2] = std::byte{5};  // last block's layout index (u16) → 5 of 2
  EXPECT_NE(message_of([&] { decode_reply(bytes); }).find("layout index 5 of 2"),
            std::string::npos);
}

TEST(KvWire, EncoderRefusesFramesPastTheLimits) {
  RequestFrame f = sample_request();
  f.lease_id = std::string(kMaxLeaseIdBytes + 1, 'l');
  EXPECT_THROW(encode_request(f), Error);
  f = sample_request();
  f.block_ids.resize(kMaxBlocksPerPull + 1);
  EXPECT_THROW(encode_request(f), Error);
  ReplyFrame r = sample_reply();
  r.layouts[0].resize(kMaxRangesPerBlock + 1);
  EXPECT_THROW(encode_reply(r), Error);
}

// Writes the fuzzer's seeds when asked (TERN_WRITE_SEEDS=dir); otherwise a no-op.
// The fuzzer's committed seeds are the encoder's frames (TERN_WRITE_SEEDS=DIR writes them anew).
TEST(KvWire, CommittedFuzzSeedsAreTheEncodersFrames) {
  ReplyFrame refused;
  refused.status = ReplyStatus::kRefused;
  refused.message = "unknown lease";
  std::vector<std::byte> header(kBlockHeaderBytes);
  encode_block_header(BlockHeader{1, 2}, header.data());
  const std::pair<const char*, std::vector<std::byte>> seeds[] = {
      {"request.bin", encode_request(sample_request())},
      {"reply_ok.bin", encode_reply(sample_reply())},
      {"reply_refused.bin", encode_reply(refused)},
      {"block_header.bin", header},
  };
  const char* write_dir = std::getenv("TERN_WRITE_SEEDS");
  for (const auto& [name, bytes] : seeds) {
    if (write_dir != nullptr) {
      std::ofstream out(std::string(write_dir) + "/" + name, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
      ASSERT_TRUE(out.good()) << name;
      continue;
    }
    std::ifstream in(std::string(TERN_SOURCE_DIR) + "/fuzz/seeds/kv_wire_fuzz/" + name,
                     std::ios::binary);
    ASSERT_TRUE(in.good()) << name;
    const std::string committed((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
    EXPECT_EQ(committed, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()))
        << name << " differs from what the encoder writes";
  }
}

}  // namespace
}  // namespace tern::disagg
