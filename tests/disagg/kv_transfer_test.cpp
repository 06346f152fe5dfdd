// KvTransferServer + KvTransferClient in one process over loopback: random bytes over scattered
// ranges arrive where they belong, many blocks, concurrent clients, reused connections, stats;
// and the whole suite again in a child process under UCX_TLS=tcp.
#include "tern/disagg/kv_transfer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>

#include "disagg/kv_test_cache.h"
#include "tern/core/error.h"

namespace tern::disagg {
namespace {

using testing::FakeCache;
using testing::kv_layout;

constexpr char kFingerprint[] = "test-model:kv-q8_0:L14";

// The producer counts a send when UCX reports it complete, which may come a little after the
// consumer has the bytes: wait (bounded, a liveness check) for its counters to settle.
template <typename F>
bool settles(F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// A handler that grants blocks of `cache` under one lease, counting calls and outcomes.
struct Producer {
  FakeCache& cache;
  std::string lease = "lease-1";
  std::atomic<int> calls{0}, done_ok{0}, done_failed{0};

  PullHandler handler() {
    return [this](const PullRequest& r) -> std::variant<PullGrant, std::string> {
      ++calls;
      if (r.lease_id != lease) return "unknown lease '" + r.lease_id + "'";
      PullGrant g;
      for (int32_t id : r.block_ids) {
        if (id < 0 || id >= cache.num_blocks())
          return "block id " + std::to_string(id) + " out of range";
        g.blocks.push_back(cache.block(id));
      }
      g.on_done = [this](bool sent) { ++(sent ? done_ok : done_failed); };
      return g;
    };
  }
};

std::vector<std::vector<std::span<std::byte>>> dest_blocks(FakeCache& cache,
                                                           const std::vector<int>& ids) {
  std::vector<std::vector<std::span<std::byte>>> out;
  for (int id : ids) out.push_back(cache.block_mut(id));
  return out;
}

std::vector<int32_t> shuffled_ids(int n, int count, uint32_t seed) {
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  ids.resize(count);
  return ids;
}

// Pulls `ids` of `src` into blocks 0.. of `dst` and checks every byte.
void pull_and_check(KvTransferClient& client, int port, const std::string& lease,
                    const FakeCache& src, FakeCache& dst, const std::vector<int32_t>& ids) {
  std::vector<int> dst_ids(ids.size());
  std::iota(dst_ids.begin(), dst_ids.end(), 0);
  const auto dest = dest_blocks(dst, dst_ids);
  const PullResult r = client.pull("127.0.0.1", port, PullRequest{lease, ids}, dest, 60);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.bytes, ids.size() * src.block_bytes());
  for (size_t i = 0; i < ids.size(); ++i)
    ASSERT_TRUE(dst.same_block(static_cast<int>(i), src, ids[i])) << "block " << i;
  EXPECT_TRUE(dst.gaps_are_zero());
}

TEST(UcxTransfer, RoundTripOfRandomBytesOverScatteredRanges) {
  FakeCache src(32, kv_layout(4, 4096, 128), /*seed=*/1);
  FakeCache dst(32, src.sizes(), 0);
  Producer producer{src};
  KvTransferServer server({"127.0.0.1", 0, kFingerprint}, producer.handler());
  ASSERT_GT(server.port(), 0);
  KvTransferClient client(kFingerprint);
  pull_and_check(client, server.port(), "lease-1", src, dst, shuffled_ids(32, 20, 7));
  EXPECT_EQ(producer.calls, 1);
}

TEST(UcxTransfer, SmallAndEmptyRangesAndAnEmptyPull) {
  // Tiny blocks go eagerly (copied on arrival), zero-byte ranges move nothing, no blocks is a pull
  // too.
  FakeCache src(8, {3, 0, 17, 1}, 2);
  FakeCache dst(8, src.sizes(), 0);
  Producer producer{src};
  KvTransferServer server({"127.0.0.1", 0, kFingerprint}, producer.handler());
  KvTransferClient client(kFingerprint);
  pull_and_check(client, server.port(), "lease-1", src, dst, {5, 0, 7});
  const PullResult r = client.pull("127.0.0.1", server.port(), PullRequest{"lease-1", {}}, {}, 60);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.bytes, 0u);
}

TEST(UcxTransfer, FiveHundredBlocksOfFiftySixRanges) {
  FakeCache src(600, kv_layout(14, 1024, 32), 3);  // 56 ranges, 29,568 bytes a block
  FakeCache dst(600, src.sizes(), 0);
  ASSERT_EQ(src.sizes().size(), 56u);
  Producer producer{src};
  KvTransferServer server({"127.0.0.1", 0, kFingerprint}, producer.handler());
  KvTransferClient client(kFingerprint);
  pull_and_check(client, server.port(), "lease-1", src, dst, shuffled_ids(600, 500, 11));
  ASSERT_TRUE(settles([&] { return producer.done_ok == 1; }));
  const auto s = server.stats();
  EXPECT_EQ(s.blocks_sent, 500u);
  EXPECT_EQ(s.bytes_sent, 500 * src.block_bytes());
}

TEST(UcxTransfer, ConcurrentClientsEachGetTheirOwnBlocks) {
  FakeCache src(64, kv_layout(4, 8192, 256), 4);
  Producer producer{src};
  KvTransferServer server({"127.0.0.1", 0, kFingerprint}, producer.handler());
  constexpr int kClients = 4;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kClients);
  for (int c = 0; c < kClients; ++c)
    threads.emplace_back([&, c] {
      KvTransferClient client(kFingerprint);
      FakeCache dst(64, src.sizes(), 0);
      for (int round = 0; round < 3; ++round) {
        const auto ids = shuffled_ids(64, 16 + c, 100 * c + round);
        std::vector<int> dst_ids(ids.size());
        std::iota(dst_ids.begin(), dst_ids.end(), 0);
        const auto dest = dest_blocks(dst, dst_ids);
        const PullResult r =
            client.pull("127.0.0.1", server.port(), PullRequest{"lease-1", ids}, dest, 60);
        if (!r.ok) failures[c] = r.error;
        for (size_t i = 0; i < ids.size() && r.ok; ++i)
          if (!dst.same_block(static_cast<int>(i), src, ids[i]))
            failures[c] = "client " + std::to_string(c) + ": wrong bytes";
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& f : failures) EXPECT_EQ(f, "");
  ASSERT_TRUE(settles([&] { return producer.done_ok + producer.done_failed == 3 * kClients; }));
  const auto s = server.stats();
  EXPECT_EQ(s.pulls_served, 3u * kClients);
  EXPECT_EQ(producer.done_ok, 3 * kClients);
  EXPECT_EQ(producer.done_failed, 0);
}

TEST(UcxTransfer, StatsCountBothSidesOverAReusedConnection) {
  FakeCache src(16, kv_layout(2, 65536, 0), 5);  // 256 KiB blocks: rendezvous
  FakeCache dst(16, src.sizes(), 0);
  Producer producer{src};
  KvTransferServer server({"127.0.0.1", 0, kFingerprint}, producer.handler());
  KvTransferClient client(kFingerprint);
  pull_and_check(client, server.port(), "lease-1", src, dst, {1, 2, 3});
  pull_and_check(client, server.port(), "lease-1", src, dst, {9, 8});
  ASSERT_TRUE(settles([&] { return producer.done_ok + producer.done_failed == 2; }));
  const auto s = server.stats();
  EXPECT_EQ(s.pulls_served, 2u);
  EXPECT_EQ(s.blocks_sent, 5u);
  EXPECT_EQ(s.bytes_sent, 5 * src.block_bytes());
  EXPECT_EQ(s.pulls_refused, 0u);
  EXPECT_EQ(s.bad_frames, 0u);
  EXPECT_EQ(client.stats().blocks_received, 5u);
  EXPECT_EQ(client.stats().bytes_received, 5 * src.block_bytes());
  EXPECT_EQ(producer.done_ok, 2);
}

TEST(UcxTransfer, ProducerRefusalReachesTheClientAndTheConnectionStaysUsable) {
  FakeCache src(4, kv_layout(1, 64, 0), 6);
  FakeCache dst(4, src.sizes(), 0);
  Producer producer{src};
  KvTransferServer server({"127.0.0.1", 0, kFingerprint}, producer.handler());
  KvTransferClient client(kFingerprint);
  const auto dest = dest_blocks(dst, {0});
  PullResult r = client.pull("127.0.0.1", server.port(), PullRequest{"stale-lease", {1}}, dest, 60);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("refused by producer 127.0.0.1:" + std::to_string(server.port()) +
                         ": unknown lease 'stale-lease'"),
            std::string::npos)
      << r.error;
  r = client.pull("127.0.0.1", server.port(), PullRequest{"lease-1", {9}}, dest, 60);
  EXPECT_NE(r.error.find("block id 9 out of range"), std::string::npos) << r.error;
  EXPECT_EQ(server.stats().pulls_refused, 2u);
  pull_and_check(client, server.port(), "lease-1", src, dst, {3});
}

TEST(UcxTransfer, FingerprintMismatchNamesBothAndNeverCallsTheHandler) {
  FakeCache src(4, kv_layout(1, 64, 0), 7);
  FakeCache dst(4, src.sizes(), 0);
  Producer producer{src};
  KvTransferServer server({"127.0.0.1", 0, "model-A"}, producer.handler());
  KvTransferClient client("model-B");
  const auto dest = dest_blocks(dst, {0});
  const PullResult r =
      client.pull("127.0.0.1", server.port(), PullRequest{"lease-1", {1}}, dest, 60);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("fingerprint mismatch"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("'model-A'"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("'model-B'"), std::string::npos) << r.error;
  EXPECT_EQ(producer.calls, 0);
  EXPECT_EQ(server.stats().pulls_refused, 1u);
}

TEST(UcxTransfer, RangeSizeMismatchIsAnErrorAndNothingLandsPastTheSpans) {
  FakeCache src(4, kv_layout(2, 65536, 64), 8);
  FakeCache dst(4, kv_layout(2, 65536, 32), 0);  // other scale sizes, same range count
  Producer producer{src};
  KvTransferServer server({"127.0.0.1", 0, kFingerprint}, producer.handler());
  KvTransferClient client(kFingerprint);
  const auto dest = dest_blocks(dst, {0, 1});
  const PullResult r =
      client.pull("127.0.0.1", server.port(), PullRequest{"lease-1", {2, 3}}, dest, 60);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("range size mismatch at block 0 (producer block id 2)"), std::string::npos)
      << r.error;
  EXPECT_TRUE(dst.gaps_are_zero());
  // The client dropped the connection, so the producer's sends fail and its blocks are released.
  while (producer.done_failed + producer.done_ok == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(producer.done_failed, 1);
  // A block count that differs from the request's is refused before anything is sent.
  const PullResult r2 =
      client.pull("127.0.0.1", server.port(), PullRequest{"lease-1", {2}}, dest, 60);
  EXPECT_FALSE(r2.ok);
  EXPECT_NE(r2.error.find("pull of 1 block ids into 2 destination blocks"), std::string::npos)
      << r2.error;
}

TEST(UcxTransfer, ServerRefusesToListenOnATakenPort) {
  FakeCache src(1, {8}, 9);
  Producer producer{src};
  KvTransferServer first({"127.0.0.1", 0, kFingerprint}, producer.handler());
  try {
    KvTransferServer second({"127.0.0.1", first.port(), kFingerprint}, producer.handler());
    FAIL() << "a second server listened on port " << first.port();
  } catch (const Error& e) {
    const std::string port = std::to_string(first.port());
    EXPECT_NE(std::string(e.what()).find("cannot listen on 127.0.0.1:" + port + ": port " + port +
                                         " in use"),
              std::string::npos)
        << e.what();
  }
}

// The suite above once more, in a child process whose UCX may use only TCP (the default on one
// machine is shared memory), so both transports are covered by every round trip.
TEST(UcxTransferTcp, TheSuitePassesWithUcxTlsTcp) {
  if (std::getenv("UCX_TLS") != nullptr)
    GTEST_SKIP() << "already restricted to UCX_TLS=" << std::getenv("UCX_TLS");
  const std::string log = ::testing::TempDir() + "ucx_tcp_suite.log";
  const pid_t pid = testing::spawn_self("UcxTransfer.*:UcxFailure.*", {{"UCX_TLS", "tcp"}}, log);
  const int code = testing::wait_exit_code(pid);
  const std::string out = testing::read_file(log);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.find("FAILED"), std::string::npos) << out;
  EXPECT_NE(out.find("[  PASSED  ]"), std::string::npos) << out;
  size_t ok = 0;
  for (size_t at = out.find("[       OK ]"); at != std::string::npos;
       at = out.find("[       OK ]", at + 1))
    ++ok;
  EXPECT_GE(ok, 14u) << out;  // each UcxTransfer and UcxFailure case ran, none was filtered away
}

}  // namespace
}  // namespace tern::disagg
