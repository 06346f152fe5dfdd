// The msgpack of a batch, byte for byte as msgspec writes vLLM's array-like tagged structs
// (worked out by hand from the msgpack spec), and replay requests as the ROUTER reads them.
#include "tern/kv_events/kv_event_encoding.h"

#include <gtest/gtest.h>

#include <string>

#include "tern/kv_events/zmq_event_publisher.h"

namespace tern::kv_events {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string out;
  for (int c : b) out += static_cast<char>(c);
  return out;
}

TEST(KvEventEncoding, ByteForByteAsMsgspecWritesIt) {
  KvEventBatch batch;
  batch.ts = 1.5;
  BlockStored stored;
  stored.block_hashes = {0xffffffffffffffffull};
  stored.token_ids = {1, 300};
  stored.block_size = 2;
  BlockStored child;
  child.block_hashes = {7};
  child.parent_block_hash = 0xffffffffffffffffull;
  child.token_ids = {5, 6};
  child.block_size = 2;
  batch.events = {stored, child, BlockRemoved{{5}}, AllBlocksCleared{}};

  const std::string ff8 = bytes({0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  const std::string cpu =
      "\xa3"
      "CPU";
  std::string expected = bytes({0x93, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x94});
  // ["BlockStored", [hash], nil, [1, 300], 2, nil, "CPU", nil]
  expected +=
      "\x98\xab"
      "BlockStored"
      "\x91" +
      ff8 + "\xc0" + bytes({0x92, 0x01, 0xcd, 0x01, 0x2c, 0x02, 0xc0}) + cpu + "\xc0";
  // ["BlockStored", [7], parent, [5, 6], 2, nil, "CPU", nil]
  expected +=
      "\x98\xab"
      "BlockStored" +
      bytes({0x91, 0x07}) + ff8 + bytes({0x92, 0x05, 0x06, 0x02, 0xc0}) + cpu + "\xc0";
  // ["BlockRemoved", [5], "CPU"]
  expected +=
      "\x93\xac"
      "BlockRemoved" +
      bytes({0x91, 0x05}) + cpu;
  // ["AllBlocksCleared"], then data_parallel_rank 0
  expected +=
      "\x91\xb0"
      "AllBlocksCleared" +
      bytes({0x00});
  EXPECT_EQ(encode_kv_event_batch(batch), expected);
}

TEST(KvEventEncoding, ReplayRequests) {
  const std::string seq = bytes({0, 0, 0, 0, 0, 0, 0x01, 0x02});
  EXPECT_EQ(parse_replay_request({"id", "", seq}), 0x0102u);
  EXPECT_EQ(parse_replay_request({"id", "", std::string(8, '\xff')}), ~uint64_t{0});
  EXPECT_FALSE(parse_replay_request({"id", seq}));               // no delimiter
  EXPECT_FALSE(parse_replay_request({"id", "x", seq}));          // not an empty delimiter
  EXPECT_FALSE(parse_replay_request({"id", "", seq + "\x01"}));  // 9 bytes
  EXPECT_FALSE(parse_replay_request({"id", "", seq, ""}));       // a frame more
}

}  // namespace
}  // namespace tern::kv_events
