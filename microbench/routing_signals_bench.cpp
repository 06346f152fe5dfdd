// What a pod pays for the signals llm-d's routers read: rendering /metrics (the endpoint
// picker polls every 50 ms; the page with both name sets and every histogram filled), and
// encoding a step's KV cache events (a 2k-token prompt's 128 blocks of 16 stored, 128 evicted).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "tern/kv_events/kv_event_encoding.h"
#include "tern/server/server_metrics.h"

namespace {

void BM_MetricsPage(benchmark::State& state) {
  tern::server::ServerMetrics metrics(32768, tern::server::MetricNames::Both);
  for (int i = 0; i < 1000; ++i) {
    tern::RequestMetrics m;
    m.arrival_time = 0;
    m.first_scheduled_time = 0.001 * i;
    m.first_token_time = 0.002 * i;
    m.last_token_time = 0.01 * i;
    m.finished_time = 0.01 * i;
    m.num_prompt_tokens = i;
    m.num_generation_tokens = 2 + i % 300;
    metrics.observe_finished(m, "length");
    metrics.observe_inter_token_latency(0.0001 * i);
  }
  tern::EngineStats stats;
  stats.num_blocks = 4096;
  stats.block_size = 16;
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string page = metrics.render("Qwen/Qwen3-0.6B", stats);
    bytes = page.size();
    benchmark::DoNotOptimize(page.data());
  }
  state.counters["page_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_MetricsPage);

void BM_EncodeKvEventBatch(benchmark::State& state) {
  tern::kv_events::BlockStored stored;
  stored.block_size = 16;
  tern::kv_events::BlockRemoved removed;
  for (uint64_t b = 0; b < 128; ++b) {
    stored.block_hashes.push_back(0x9e3779b97f4a7c15ull * (b + 1));
    removed.block_hashes.push_back(0xc2b2ae3d27d4eb4full * (b + 1));
    for (int t = 0; t < 16; ++t) stored.token_ids.push_back(static_cast<int32_t>(b * 16 + t) * 37);
  }
  const tern::kv_events::KvEventBatch batch{1.0e9, {stored, removed}, 0};
  for (auto _ : state) benchmark::DoNotOptimize(tern::kv_events::encode_kv_event_batch(batch));
}
BENCHMARK(BM_EncodeKvEventBatch);

}  // namespace
