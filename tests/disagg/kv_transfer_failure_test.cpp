// KV transfer failures, each a clear error and never a hang: no producer, a timeout, the
// producer dying mid-transfer (a child process that serves and is killed), the consumer dying
// mid-pull (a child process that pulls), the server destroyed under a pull, garbage and
// oversized frames on the port, and a producer restarted on the same port.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "disagg/kv_test_cache.h"
#include "tern/core/error.h"
#include "tern/disagg/kv_transfer.h"
#include "tern/disagg/kv_wire.h"
#include "tern/disagg/ucx_worker.h"

namespace tern::disagg {
namespace {

using testing::FakeCache;
using testing::kv_layout;

constexpr char kF16Fingerprint[] = "test-model:kv-f16";
constexpr int kBigBlocks = 400;  // 400 × 256 KiB = 100 MiB: a pull that lasts long enough to be cut

// Liveness bound for things that must happen (not a timing assertion: a hang fails, slowness not).
template <typename F>
bool eventually(F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

PullHandler grant_all(const FakeCache& cache, std::atomic<int>* calls, std::atomic<int>* ok,
                      std::atomic<int>* failed) {
  return [&cache, calls, ok, failed](const PullRequest& r) -> std::variant<PullGrant, std::string> {
    if (calls) ++*calls;
    PullGrant g;
    for (int32_t id : r.block_ids) g.blocks.push_back(cache.block(id % cache.num_blocks()));
    g.on_done = [ok, failed](bool sent) {
      if (sent && ok) ++*ok;
      if (!sent && failed) ++*failed;
    };
    return g;
  };
}

std::vector<int32_t> iota_ids(int n) {
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i;
  return ids;
}

std::vector<std::vector<std::span<std::byte>>> dest_of(FakeCache& cache, int n) {
  std::vector<std::vector<std::span<std::byte>>> out;
  for (int i = 0; i < n; ++i) out.push_back(cache.block_mut(i));
  return out;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// The child processes of these tests: a producer that kills itself once its first block has
// been sent, and a consumer that pulls a big lease (and is killed by the test).
TEST(DisaggChild, Main) {
  const char* role = std::getenv("TERN_DISAGG_CHILD");
  if (role == nullptr) GTEST_SKIP() << "runs only as a child process of the UcxFailure tests";
  FakeCache cache(4, {65536, 65536, 65536, 65536}, 21);
  if (std::string(role) == "producer") {
    KvTransferServer* server_ptr = nullptr;
    std::thread killer;
    KvTransferServer server({"127.0.0.1", 0, kF16Fingerprint}, [&](const PullRequest& r) {
      // Dies like a crashed instance (SIGKILL: no destructor, no goodbye) once data is moving.
      killer = std::thread([&] {
        while (server_ptr->stats().bytes_sent == 0)
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        ::kill(::getpid(), SIGKILL);
      });
      return grant_all(cache, nullptr, nullptr, nullptr)(r);
    });
    server_ptr = &server;
    {
      std::ofstream out(std::getenv("TERN_DISAGG_PORT_FILE") + std::string(".tmp"));
      out << server.port();
    }
    std::rename((std::getenv("TERN_DISAGG_PORT_FILE") + std::string(".tmp")).c_str(),
                std::getenv("TERN_DISAGG_PORT_FILE"));
    std::this_thread::sleep_for(std::chrono::seconds(120));
    ADD_FAILURE() << "producer child was not killed";
    std::_Exit(1);
  }
  if (std::string(role) == "consumer") {
    FakeCache dst(kBigBlocks, cache.sizes(), 0);
    KvTransferClient client(kF16Fingerprint);
    const auto dest = dest_of(dst, kBigBlocks);
    client.pull("127.0.0.1", std::atoi(std::getenv("TERN_DISAGG_PORT")),
                PullRequest{"l", iota_ids(kBigBlocks)}, dest, 120);
    std::_Exit(1);  // not reached when the test kills it mid-pull
  }
}

TEST(UcxFailure, ProducerNotListeningIsAQuickConnectError) {
  const int port = free_port();
  KvTransferClient client(kF16Fingerprint);
  FakeCache dst(1, {64}, 0);
  const auto dest = dest_of(dst, 1);
  const PullResult r = client.pull("127.0.0.1", port, PullRequest{"l", {0}}, dest, 60);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << r.error;
  EXPECT_EQ(r.error.find("timed out"), std::string::npos) << r.error;  // detected, not waited out
  EXPECT_NE(r.error.find("connect"), std::string::npos) << r.error;
}

TEST(UcxFailure, PortInUseIsNamed) {
  // A plain listening socket holds the port, as another program would.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  const FakeCache src(1, {64}, 0);
  std::string message;
  try {
    KvTransferServer server(KvTransferServerConfig{"127.0.0.1", port, kF16Fingerprint},
                            grant_all(src, nullptr, nullptr, nullptr));
  } catch (const Error& e) {
    message = e.what();
  }
  ::close(fd);
  EXPECT_NE(message.find("port " + std::to_string(port) + " in use"), std::string::npos) << message;
  EXPECT_EQ(message.find("busy"), std::string::npos) << message;
}

TEST(UcxFailure, AnAddressOfAnotherMachineIsNamed) {
  const FakeCache src(1, {64}, 0);
  std::string message;
  try {  // 192.0.2.1: TEST-NET-1, documentation only, never an address of this machine
    KvTransferServer server(KvTransferServerConfig{"192.0.2.1", 0, kF16Fingerprint},
                            grant_all(src, nullptr, nullptr, nullptr));
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("cannot listen on 192.0.2.1:0"), std::string::npos) << message;
  EXPECT_NE(message.find("is 192.0.2.1 an address of this machine"), std::string::npos) << message;
}

TEST(UcxFailure, TimeoutWhileTheProducerIsStuck) {
  FakeCache src(2, kv_layout(1, 4096, 0), 22);
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> calls{0}, ok{0}, failed{0};
  auto grant = grant_all(src, &calls, &ok, &failed);
  KvTransferServer server({"127.0.0.1", 0, kF16Fingerprint}, [&](const PullRequest& r) {
    ++calls;
    std::unique_lock lock(m);
    if (calls == 1) cv.wait_for(lock, std::chrono::seconds(60), [&] { return release; });
    return grant(r);
  });
  KvTransferClient client(kF16Fingerprint);
  FakeCache dst(2, src.sizes(), 0);
  const auto dest = dest_of(dst, 2);
  PullResult r = client.pull("127.0.0.1", server.port(), PullRequest{"l", {0, 1}}, dest, 0.3);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("timed out after 0.3 s waiting for producer 127.0.0.1:" +
                         std::to_string(server.port()) + ", no reply"),
            std::string::npos)
      << r.error;
  {
    std::lock_guard lock(m);
    release = true;
  }
  cv.notify_all();
  // The client gave up and closed its connection: the late grant's send fails, its blocks return.
  EXPECT_TRUE(eventually([&] { return failed == 1; }));
  r = client.pull("127.0.0.1", server.port(), PullRequest{"l", {1, 0}}, dest, 60);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(dst.same_block(0, src, 1));
}

TEST(UcxFailure, ProducerDiesMidTransfer) {
  const std::string port_file =
      ::testing::TempDir() + "kv_producer_port." + std::to_string(::getpid());
  std::remove(port_file.c_str());
  const pid_t pid = testing::spawn_self(
      "DisaggChild.Main", {{"TERN_DISAGG_CHILD", "producer"}, {"TERN_DISAGG_PORT_FILE", port_file}},
      port_file + ".log");
  ASSERT_TRUE(eventually([&] { return !testing::read_file(port_file).empty(); }))
      << testing::read_file(port_file + ".log");
  const int port = std::stoi(testing::read_file(port_file));
  FakeCache dst(kBigBlocks, {65536, 65536, 65536, 65536}, 0);
  KvTransferClient client(kF16Fingerprint);
  const auto dest = dest_of(dst, kBigBlocks);
  const PullResult r =
      client.pull("127.0.0.1", port, PullRequest{"l", iota_ids(kBigBlocks)}, dest, 60);
  EXPECT_EQ(testing::wait_exit_code(pid), 128 + SIGKILL);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("producer 127.0.0.1:" + std::to_string(port) + " died mid-transfer"),
            std::string::npos)
      << r.error;
  EXPECT_TRUE(dst.gaps_are_zero());
  std::remove(port_file.c_str());
  std::remove((port_file + ".log").c_str());
}

TEST(UcxFailure, ConsumerDiesMidPullAndTheServerServesTheNext) {
  FakeCache src(4, {65536, 65536, 65536, 65536}, 21);
  std::atomic<pid_t> child{0};
  std::atomic<int> calls{0}, ok{0}, failed{0};
  auto grant = grant_all(src, nullptr, &ok, &failed);
  KvTransferServer server({"127.0.0.1", 0, kF16Fingerprint}, [&](const PullRequest& r) {
    // Freeze the consumer before its data moves, so the kill below always lands mid-pull.
    while (child == 0) std::this_thread::yield();
    if (++calls == 1) ::kill(child, SIGSTOP);
    return grant(r);
  });
  const std::string log =
      ::testing::TempDir() + "kv_consumer." + std::to_string(::getpid()) + ".log";
  child = testing::spawn_self(
      "DisaggChild.Main",
      {{"TERN_DISAGG_CHILD", "consumer"}, {"TERN_DISAGG_PORT", std::to_string(server.port())}},
      log);
  ASSERT_TRUE(eventually([&] { return calls == 1; })) << testing::read_file(log);
  ::kill(child, SIGKILL);
  EXPECT_EQ(testing::wait_exit_code(child), 128 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return failed == 1; })) << "on_done(false) never ran";
  EXPECT_EQ(ok, 0);
  // The next consumer is served.
  FakeCache dst(8, src.sizes(), 0);
  KvTransferClient client(kF16Fingerprint);
  const auto dest = dest_of(dst, 8);
  const PullResult r =
      client.pull("127.0.0.1", server.port(), PullRequest{"l", iota_ids(8)}, dest, 60);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(dst.same_block(5, src, 1));
  // The producer counts a pull once UCX reports its sends complete, a little after the consumer
  // has the bytes.
  EXPECT_TRUE(eventually([&] { return ok == 1; }));
  EXPECT_EQ(server.stats().pulls_served, 1u);
  EXPECT_EQ(failed, 1);
  std::remove(log.c_str());
}

TEST(UcxFailure, ServerDestroyedUnderABigPull) {
  FakeCache src(4, {65536, 65536, 65536, 65536}, 23);
  std::atomic<int> calls{0}, ok{0}, failed{0};
  auto server =
      std::make_unique<KvTransferServer>(KvTransferServerConfig{"127.0.0.1", 0, kF16Fingerprint},
                                         grant_all(src, &calls, &ok, &failed));
  const int port = server->port();
  FakeCache dst(kBigBlocks, src.sizes(), 0);
  KvTransferClient client(kF16Fingerprint);
  const auto dest = dest_of(dst, kBigBlocks);
  PullResult r;
  std::thread puller([&] {
    r = client.pull("127.0.0.1", port, PullRequest{"l", iota_ids(kBigBlocks)}, dest, 60);
  });
  ASSERT_TRUE(eventually([&] { return calls == 1; }));
  server.reset();  // closes the endpoints with the sends in flight
  puller.join();
  EXPECT_EQ(ok + failed, 1);  // on_done ran exactly once, before the destructor returned
  if (failed == 1) {
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("producer 127.0.0.1:" + std::to_string(port)), std::string::npos)
        << r.error;
    EXPECT_EQ(r.error.find("timed out"), std::string::npos) << r.error;
  }
}

TEST(UcxFailure, ReconnectsToAProducerRestartedOnTheSamePort) {
  FakeCache src(4, kv_layout(2, 8192, 0), 24);
  FakeCache dst(4, src.sizes(), 0);
  KvTransferClient client(kF16Fingerprint);
  const auto dest = dest_of(dst, 2);
  auto server =
      std::make_unique<KvTransferServer>(KvTransferServerConfig{"127.0.0.1", 0, kF16Fingerprint},
                                         grant_all(src, nullptr, nullptr, nullptr));
  const int port = server->port();
  PullResult r = client.pull("127.0.0.1", port, PullRequest{"l", {0, 1}}, dest, 60);
  ASSERT_TRUE(r.ok) << r.error;
  server.reset();
  server =
      std::make_unique<KvTransferServer>(KvTransferServerConfig{"127.0.0.1", port, kF16Fingerprint},
                                         grant_all(src, nullptr, nullptr, nullptr));
  r = client.pull("127.0.0.1", port, PullRequest{"l", {3, 2}}, dest, 60);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(dst.same_block(0, src, 3));
  EXPECT_TRUE(dst.same_block(1, src, 2));
}

// A UCX peer that speaks garbage: its endpoint to the server, and whether the server closed it.
struct RawPeer {
  UcxWorker worker{"raw-peer", /*listens=*/false};
  ucp_ep_h ep = nullptr;
  bool dead = false;
  explicit RawPeer(int port) {
    socklen_t len = 0;
    const sockaddr_storage addr = resolve_address("127.0.0.1", port, &len);
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                   UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    p.sockaddr.addrlen = len;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t) {
      static_cast<RawPeer*>(arg)->dead = true;
    };
    p.err_handler.arg = this;
    EXPECT_EQ(ucp_ep_create(worker.get(), &p, &ep), UCS_OK);
  }
  ~RawPeer() { worker.close_endpoint(ep, true); }
  void send(const std::vector<std::byte>& bytes, uint32_t flags) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_REPLY | flags;
    (void)ucx_wait_request(worker, ucp_am_send_nbx(ep, kAmPullRequest, nullptr, 0, bytes.data(),
                                                   bytes.size(), &param));
  }
  bool closed_by_server() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!dead && std::chrono::steady_clock::now() < until) worker.wait(10);
    return dead;
  }
};

TEST(UcxFailure, GarbageAndOversizedFramesAreRefusedAndTheServerKeepsServing) {
  FakeCache src(4, kv_layout(1, 4096, 0), 25);
  std::atomic<int> calls{0};
  KvTransferServer server({"127.0.0.1", 0, kF16Fingerprint},
                          grant_all(src, &calls, nullptr, nullptr));
  // Raw TCP junk at the listening port (not even a UCX connection).
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(server.port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    std::vector<char> junk(65536);
    std::mt19937 rng(5);
    for (auto& c : junk) c = static_cast<char>(rng());
    [[maybe_unused]] ssize_t n = ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    ::close(fd);
  }
  // A UCX peer sending a request frame that is garbage.
  {
    RawPeer peer(server.port());
    peer.send(std::vector<std::byte>(100, std::byte{0x5a}), UCP_AM_SEND_FLAG_EAGER);
    EXPECT_TRUE(peer.closed_by_server());
    EXPECT_EQ(server.stats().bad_frames, 1u);
  }
  // One longer than any valid request (sent by rendezvous: refused unread) and one eager.
  for (uint32_t flags : {0u, static_cast<uint32_t>(UCP_AM_SEND_FLAG_EAGER)}) {
    RawPeer peer(server.port());
    peer.send(std::vector<std::byte>(kMaxRequestBytes + 1), flags);
    EXPECT_TRUE(peer.closed_by_server());
  }
  EXPECT_EQ(server.stats().bad_frames, 3u);
  EXPECT_EQ(calls, 0);
  // A well-behaved consumer is still served.
  FakeCache dst(4, src.sizes(), 0);
  KvTransferClient client(kF16Fingerprint);
  const auto dest = dest_of(dst, 2);
  const PullResult r = client.pull("127.0.0.1", server.port(), PullRequest{"l", {2, 3}}, dest, 60);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(dst.same_block(1, src, 3));
}

}  // namespace
}  // namespace tern::disagg
