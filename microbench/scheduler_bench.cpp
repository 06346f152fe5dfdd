// The engine's bookkeeping per step without the model: Scheduler::schedule + complete over N
// decoding sequences (block allocation, prefix-cache keys of every block that fills). What a
// step costs on top of the forward; it should stay in microseconds next to a forward's
// milliseconds.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "tern/scheduler/block_manager.h"
#include "tern/scheduler/scheduler.h"

namespace {

void BM_DecodeStep(benchmark::State& state) {
  const int num_seqs = static_cast<int>(state.range(0));
  const bool caching = state.range(1) != 0;
  tern::BlockManager blocks(200000, 16, caching);
  tern::SchedulerConfig config;
  config.max_num_seqs = num_seqs;
  config.max_num_batched_tokens = 1 << 20;
  tern::Scheduler scheduler(config, blocks);
  std::vector<std::unique_ptr<tern::Sequence>> seqs;
  for (int i = 0; i < num_seqs; ++i) {
    auto s = std::make_unique<tern::Sequence>();
    for (int t = 0; t < 300; ++t) s->token_ids.push_back((i * 7919 + t * 31) % 150000);
    s->num_prompt_tokens = 300;
    scheduler.add(s.get());
    seqs.push_back(std::move(s));
  }
  int64_t steps = 0;
  for (auto _ : state) {
    tern::SchedulerStep step = scheduler.schedule();
    scheduler.complete(step);
    for (const auto& c : step.chunks)
      if (c.sample) c.seq->token_ids.push_back(static_cast<int32_t>(steps % 1000));
    ++steps;
    if (seqs[0]->num_tokens() > 4000) {  // keep the sequences at a realistic length
      state.PauseTiming();
      for (auto& s : seqs) {
        scheduler.remove(s.get());
        s->token_ids.resize(300);
        s->num_computed_tokens = 0;
        s->block_keys.clear();
        scheduler.add(s.get());
      }
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(steps * num_seqs);
}
BENCHMARK(BM_DecodeStep)->Args({64, 1})->Args({256, 1})->Args({256, 0});

}  // namespace
