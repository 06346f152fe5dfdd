// Scheduler with a KV connector (disaggregation's scheduler side, with a fake connector): a
// sequence whose prompt a remote cache holds waits for blocks and its load outside the running
// set, joins the queue holding the loaded blocks, and a load's blocks outlive an abort until the
// connector lets them go.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "tern/scheduler/scheduler.h"

namespace tern {
namespace {

// Has every prompt token but the last of the sequences in `remote`; loads end when told.
struct FakeConnector final : KvConnectorHooks {
  std::set<const Sequence*> remote;
  std::vector<Sequence*> loading;
  std::vector<int64_t> load_starts;  // num_computed_tokens (the local hit) of each load started
  std::vector<Sequence> kept;        // blocks of loads whose sequences were aborted
  KvConnectorEvents events;

  int64_t num_new_matched_tokens(const Sequence& seq, int64_t num_computed_tokens) override {
    if (!remote.count(&seq)) return 0;
    return std::max<int64_t>(0, seq.num_prompt_tokens - 1 - num_computed_tokens);
  }
  void update_state_after_alloc(Sequence& seq, int64_t num_computed_tokens) override {
    loading.push_back(&seq);
    load_starts.push_back(num_computed_tokens);
  }
  std::optional<disagg::RemoteBlocks> request_finished(Sequence& seq, bool) override {
    remote.erase(&seq);
    if (auto it = std::find(loading.begin(), loading.end(), &seq); it != loading.end()) {
      loading.erase(it);
      kept.emplace_back().block_table = std::exchange(seq.block_table, {});
    }
    return std::nullopt;
  }
  KvConnectorEvents take_events() override { return std::exchange(events, {}); }

  void end_load(Sequence* seq, KvLoadOutcome::Result result) {
    loading.erase(std::find(loading.begin(), loading.end(), seq));
    events.finished_loads.push_back({seq, result, seq->num_prompt_tokens - 1, "", 0, 0});
  }
  void end_aborted_loads() {
    for (Sequence& s : kept) events.released.push_back(std::move(s));
    kept.clear();
  }
};

struct RemoteKvFixture {
  BlockManager blocks;
  Scheduler scheduler;
  FakeConnector connector;
  std::vector<std::unique_ptr<Sequence>> seqs;

  explicit RemoteKvFixture(int64_t num_blocks)
      : blocks(num_blocks, 4, true), scheduler(SchedulerConfig{}, blocks) {
    scheduler.set_kv_connector(&connector);
  }
  Sequence* add(int prompt_len, bool remote, int32_t first_token = 0) {
    auto s = std::make_unique<Sequence>();
    s->seq_id = static_cast<int64_t>(seqs.size());
    for (int i = 0; i < prompt_len; ++i) s->token_ids.push_back(first_token + i);
    s->num_prompt_tokens = prompt_len;
    if (remote) connector.remote.insert(s.get());
    scheduler.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }
  // The engine's order before scheduling.
  std::vector<KvLoadOutcome> before_schedule() {
    std::vector<KvLoadOutcome> ended = scheduler.update_from_connector();
    scheduler.start_remote_loads();
    return ended;
  }
};

TEST(SchedulerRemoteKv, ASequenceRunsOnlyOnceItsLoadEnded) {
  RemoteKvFixture f(16);
  Sequence* local = f.add(5, false);
  Sequence* remote = f.add(10, true, 100);
  EXPECT_EQ(remote->status, SequenceStatus::kWaitingForRemoteKv);
  EXPECT_EQ(f.scheduler.num_waiting(), 1);
  EXPECT_EQ(f.scheduler.num_waiting_for_remote_kv(), 1);

  f.before_schedule();
  // Blocks for its first 9 tokens, loading; it is in neither queue.
  EXPECT_EQ(f.connector.loading, std::vector<Sequence*>{remote});
  EXPECT_EQ(remote->block_table.size(), 3u);
  EXPECT_EQ(f.scheduler.num_waiting_for_remote_kv(), 0);
  SchedulerStep s1 = f.scheduler.schedule();
  ASSERT_EQ(s1.chunks.size(), 1u);
  EXPECT_EQ(s1.chunks[0].seq, local);
  f.scheduler.complete(s1);
  local->token_ids.push_back(7);
  EXPECT_EQ(f.scheduler.schedule().chunks.size(), 1u);  // still only the local one

  f.connector.end_load(remote, KvLoadOutcome::Result::kLoaded);
  const std::vector<KvLoadOutcome> ended = f.before_schedule();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(remote->status, SequenceStatus::kWaiting);
  EXPECT_EQ(remote->num_computed_tokens, 9);
  SchedulerStep s2 = f.scheduler.schedule();
  ASSERT_EQ(s2.chunks.size(), 2u);
  EXPECT_EQ(s2.chunks[1].seq, remote);
  EXPECT_EQ(s2.chunks[1].num_tokens, 1);  // the last prompt token, for the first logits
  EXPECT_TRUE(s2.chunks[1].sample);
}

TEST(SchedulerRemoteKv, LoadsOnlyWhatThePrefixCacheLacks) {
  RemoteKvFixture f(16);
  Sequence* first = f.add(10, false);
  SchedulerStep s = f.scheduler.schedule();
  f.scheduler.complete(s);  // its two full blocks enter the prefix cache
  Sequence* remote = f.add(10, true);
  f.before_schedule();
  ASSERT_EQ(f.connector.load_starts, std::vector<int64_t>{8});
  EXPECT_EQ(remote->num_cached_tokens, 8);
  EXPECT_EQ(remote->block_table[0], first->block_table[0]);
  EXPECT_EQ(remote->block_table[1], first->block_table[1]);

  // The whole pulled prefix cached: no load, straight into the queue.
  Sequence* short_remote = f.add(9, true);
  f.before_schedule();
  EXPECT_EQ(f.connector.load_starts.size(), 1u);
  EXPECT_EQ(short_remote->status, SequenceStatus::kWaiting);
  EXPECT_EQ(short_remote->num_computed_tokens, 8);
}

TEST(SchedulerRemoteKv, WaitsForBlocksFirstComeFirstServed) {
  RemoteKvFixture f(4);
  Sequence* big = f.add(13, false);
  f.scheduler.complete(f.scheduler.schedule());  // holds all 4 blocks
  Sequence* a = f.add(9, true, 100);
  Sequence* b = f.add(5, true, 200);
  f.before_schedule();
  EXPECT_TRUE(f.connector.loading.empty());
  EXPECT_EQ(f.scheduler.num_waiting_for_remote_kv(), 2);
  f.scheduler.remove(big);
  f.scheduler.start_remote_loads();
  EXPECT_EQ(f.connector.loading, (std::vector<Sequence*>{a, b}));
  EXPECT_EQ(f.blocks.num_free_blocks(), 1);
}

TEST(SchedulerRemoteKv, AnAbortedLoadsBlocksAreFreedWhenTheLoadEnds) {
  RemoteKvFixture f(8);
  Sequence* remote = f.add(9, true);
  f.before_schedule();
  EXPECT_EQ(f.blocks.num_free_blocks(), 6);
  f.scheduler.remove(remote, /*aborted=*/true);
  EXPECT_EQ(remote->status, SequenceStatus::kFinished);
  EXPECT_EQ(f.blocks.num_free_blocks(), 6);  // the load still writes into them
  f.before_schedule();
  EXPECT_EQ(f.blocks.num_free_blocks(), 6);
  f.connector.end_aborted_loads();
  f.before_schedule();
  EXPECT_EQ(f.blocks.num_free_blocks(), 8);
}

TEST(SchedulerRemoteKv, AFailedLoadFreesItsBlocksAndARecomputeRequeues) {
  RemoteKvFixture f(8);
  Sequence* failed = f.add(9, true);
  Sequence* recomputed = f.add(5, true, 50);
  f.before_schedule();
  EXPECT_EQ(f.blocks.num_free_blocks(), 5);
  f.connector.end_load(failed, KvLoadOutcome::Result::kFailed);
  f.connector.end_load(recomputed, KvLoadOutcome::Result::kRecompute);
  const std::vector<KvLoadOutcome> ended = f.before_schedule();
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_EQ(ended[0].seq, failed);
  EXPECT_EQ(f.blocks.num_free_blocks(), 8);
  // The failed one is the caller's to remove; the other prefills here from the start.
  EXPECT_EQ(f.scheduler.num_waiting(), 1);
  EXPECT_EQ(recomputed->num_computed_tokens, 0);
  f.scheduler.remove(failed, true);
  SchedulerStep s = f.scheduler.schedule();
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].seq, recomputed);
  EXPECT_EQ(s.chunks[0].num_tokens, 5);
}

}  // namespace
}  // namespace tern
