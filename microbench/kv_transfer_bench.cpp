// KV transfer throughput over loopback: a consumer pulls 64 MiB of blocks from a producer in the
// same process (its own UCX context and progress thread, so the path is the one two instances
// take), under UCX's default transports (shared memory on one machine) and under UCX_TLS=tcp.
// Blocks are Qwen3-0.6B-shaped: 28 layers × {K, V} ranges (56), each range one of 16 tokens ×
// 8 KV heads × head_dim 128 in the cache dtype; the ranges of one block are scattered as in the
// cache.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tern/disagg/kv_transfer.h"

namespace {

using namespace tern::disagg;

constexpr size_t kPullBytes = size_t{64} << 20;
constexpr int kRangesPerBlock = 56;

// range(0): transport (0: UCX's default, 1: UCX_TLS=tcp, 2: the default plus
// UCX_MM_ERROR_HANDLING=y, which lets UCX 1.13 put shared memory under error mode PEER);
// range(1): bytes of one range.
void BM_KvPull(benchmark::State& state) {
  const bool tcp = state.range(0) == 1;
  const bool mm = state.range(0) == 2;
  const size_t range_bytes = static_cast<size_t>(state.range(1));
  const char* saved = std::getenv("UCX_TLS");
  const std::string saved_tls = saved ? saved : "";
  // Each UCX context reads UCX_TLS when it is created, so this chooses the transport of both ends.
  if (tcp) ::setenv("UCX_TLS", "tcp", 1);
  if (mm) ::setenv("UCX_MM_ERROR_HANDLING", "y", 1);
  const size_t block_bytes = range_bytes * kRangesPerBlock;
  const int num_blocks = static_cast<int>(kPullBytes / block_bytes);
  // Range r of block b sits at r * region + b * range_bytes: a block's ranges are far apart.
  const size_t region = range_bytes * num_blocks;
  std::vector<std::byte> src(region * kRangesPerBlock), dst(region * kRangesPerBlock);
  std::memset(src.data(), 0x5a, src.size());
  std::memset(dst.data(), 0, dst.size());
  auto ranges_of = [&](std::vector<std::byte>& mem, int b) {
    std::vector<std::span<std::byte>> out;
    for (int r = 0; r < kRangesPerBlock; ++r)
      out.emplace_back(&mem[r * region + b * range_bytes], range_bytes);
    return out;
  };
  {
    KvTransferServer server({"127.0.0.1", 0, "bench"},
                            [&](const PullRequest& req) -> std::variant<PullGrant, std::string> {
                              PullGrant g;
                              for (int32_t id : req.block_ids) {
                                std::vector<std::span<const std::byte>> block;
                                for (auto s : ranges_of(src, id)) block.emplace_back(s);
                                g.blocks.push_back(std::move(block));
                              }
                              return g;
                            });
    KvTransferClient client("bench");
    PullRequest request{"lease", {}};
    std::vector<std::vector<std::span<std::byte>>> dest;
    for (int b = 0; b < num_blocks; ++b) {
      request.block_ids.push_back(b);
      dest.push_back(ranges_of(dst, b));
    }
    PullResult warm =
        client.pull("127.0.0.1", server.port(), request, dest, 60);  // connect + first touch
    if (!warm.ok) state.SkipWithError(warm.error.c_str());
    for (auto _ : state) {
      const PullResult r = client.pull("127.0.0.1", server.port(), request, dest, 60);
      if (!r.ok) {
        state.SkipWithError(r.error.c_str());
        break;
      }
    }
    if (std::memcmp(src.data(), dst.data(), src.size()) != 0) state.SkipWithError("bytes differ");
  }
  if (saved)
    ::setenv("UCX_TLS", saved_tls.c_str(), 1);
  else
    ::unsetenv("UCX_TLS");
  if (mm) ::unsetenv("UCX_MM_ERROR_HANDLING");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * num_blocks * block_bytes);
  state.counters["blocks"] = num_blocks;
  state.SetLabel(std::string(tcp  ? "tcp"
                             : mm ? "default+mm-errh"
                                  : "default") +
                 ", " + std::to_string(num_blocks) + " blocks of " +
                 std::to_string(block_bytes >> 10) + " KiB");
}
// Range sizes: 8 KiB (q8_0 codes of a 4-head model), 32 KiB (f16, Qwen3-0.6B), 128 KiB (64-token
// blocks).
BENCHMARK(BM_KvPull)
    ->ArgsProduct({{0, 1, 2}, {8 << 10, 32 << 10, 128 << 10}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
